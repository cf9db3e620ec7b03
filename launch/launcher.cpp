#include "launch/launcher.hpp"

#include <thread>

#include <caf/sec.hpp>

#include "cluster/host_port.hpp"
#include "cluster/net_probe.hpp"
#include "common/error.hpp"

namespace tessera::launch {

caf::error wait_ready(const std::string& host, uint16_t port, std::chrono::seconds timeout,
                      const std::function<caf::error()>& check) {
  using namespace std::chrono_literals;
  const auto start = std::chrono::steady_clock::now();
  auto last_check = start;
  std::string last = "no answer yet";
  for (;;) {
    auto r = cluster::http_get(host, port, "/ready", 2s);
    if (r && r->status == 200)
      return {};
    last = r ? "HTTP " + std::to_string(r->status) + " " + r->body : error_message(r.error());
    const auto now = std::chrono::steady_clock::now();
    const bool out_of_time = now - start >= timeout;
    if (out_of_time || now - last_check >= 2s) {
      last_check = now;
      if (auto err = check())
        return err;
    }
    if (out_of_time)
      return caf::make_error(caf::sec::runtime_error,
                             "the cluster was not ready within " + std::to_string(timeout.count()) + " s: http://" +
                               cluster::join_host_port(host, port) + "/ready answered: " + last);
    std::this_thread::sleep_for(500ms);
  }
}

std::string health_line(const std::string& host, uint16_t port, bool& ok) {
  using namespace std::chrono_literals;
  const std::string url = "http://" + cluster::join_host_port(host, port) + "/health";
  auto r = cluster::http_get(host, port, "/health", 5s);
  ok = r && r->status == 200;
  if (!r)
    return "frontend " + url + ": no answer (" + error_message(r.error()) + ")";
  std::string body = r->body;
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r'))
    body.pop_back();
  return "frontend " + url + ": " + std::to_string(r->status) + " " + body;
}

caf::expected<std::filesystem::path> write_cluster_config(const launch_plan& p, const launch_options& o,
                                                          const std::string& secret_path, std::ostream& out) {
  auto text = cluster_config_text(p, secret_path);
  if (!text)
    return text.error();
  std::error_code ec;
  std::filesystem::create_directories(o.local_dir, ec);
  if (ec)
    return caf::make_error(caf::sec::runtime_error, "cannot make " + o.local_dir.string() + ": " + ec.message());
  std::filesystem::permissions(o.local_dir, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace,
                               ec);
  const auto file = o.local_dir / "cluster.toml";
  if (auto err = write_text_file(file, *text, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write))
    return err;
  if (o.dry_run) {
    out << "# the cluster config, " << file.string() << " (parsed back: ok):\n";
    size_t pos = 0;
    while (pos < text->size()) {
      auto end = text->find('\n', pos);
      const auto line = text->substr(pos, end - pos);
      out << "#" << (line.empty() ? "" : "   " + line) << "\n";
      pos = end + 1;
    }
  }
  return file;
}

} // namespace tessera::launch
