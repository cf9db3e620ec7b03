#include "tests/support/curl.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "common/error.hpp"
#include "tests/support/temp_dir.hpp"

namespace tessera::test {

http_reply curl(const std::vector<std::string>& args, const std::string& url) {
  std::vector<std::string> argv{"-s", "-S", "-w", "\n%{http_code}\n"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(url);
  http_reply r;
  auto child = child_process::spawn("/usr/bin/curl", argv);
  if (!child)
    return r;
  std::string all;
  for (;;) {
    auto line = child->read_line(std::chrono::seconds{60});
    if (!line)
      break;
    all.append(*line).push_back('\n');
  }
  (void) child->wait(std::chrono::seconds{10});
  if (all.empty())
    return r;
  all.pop_back(); // the status line's newline
  const auto nl = all.rfind('\n');
  r.status = std::atoi(all.substr(nl == std::string::npos ? 0 : nl + 1).c_str());
  r.body = nl == std::string::npos ? std::string{} : all.substr(0, nl);
  return r;
}

child_process stream_post(const std::string& url, const std::string& body,
                          const std::vector<std::string>& headers) {
  std::vector<std::string> args{"-sN", "-X", "POST", url, "-H", "Content-Type: application/json"};
  for (const auto& h : headers) {
    args.push_back("-H");
    args.push_back(h);
  }
  args.push_back("-d");
  args.push_back(body);
  auto c = child_process::spawn("/usr/bin/curl", args, {.capture_stdout = true});
  if (!c)
    throw std::runtime_error("starting curl failed: " + error_text(c.error()));
  return std::move(*c);
}

std::vector<std::string> read_sse_events(child_process& c, bool stop_at_first) {
  std::vector<std::string> events;
  for (;;) {
    auto line = c.read_line(std::chrono::seconds{60});
    if (!line)
      break;
    if (line->rfind("data: ", 0) != 0)
      continue;
    events.push_back(line->substr(6));
    if (events.back() == "[DONE]" || stop_at_first)
      break;
  }
  return events;
}

http_reply http_get(const std::string& url) {
  return curl({}, url);
}

http_reply http_post_json(const std::string& url, const std::string& json) {
  static temp_dir dir{"tessera-curl"};
  static int n = 0;
  auto file = dir.path() / ("body-" + std::to_string(n++) + ".json");
  std::ofstream(file, std::ios::binary) << json;
  return curl({"-H", "Content-Type: application/json", "--data-binary",
               std::string{"@"}.append(file.string())},
              url);
}

} // namespace tessera::test
