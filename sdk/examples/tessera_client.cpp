// tessera-client: one completion through the native SDK, streamed to stdout
// as it arrives, or printed as JSON at the end.
//
//   tessera-client --connect 127.0.0.1:13337 --cluster-secret-file cluster.secret
//                  --prompt "Once upon a time" --max-tokens 32 [--temperature 0.8 --seed 7] [--json]

#include <cstdlib>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include <tessera/sdk.hpp>

namespace {

int usage(const std::string& why) {
  std::cerr << "tessera-client: " << why << "\n"
            << "usage: tessera-client --connect HOST:PORT [--cluster-secret-file FILE] (--prompt TEXT | --chat TEXT)\n"
            << "                      [--max-tokens N] [--temperature T] [--seed S] [--api-key KEY]\n"
            << "                      [--model NAME] [--ignore-eos] [--json]\n";
  return 2;
}

template <class T>
bool parse_number(const std::string& s, T& out) {
  try {
    size_t used = 0;
    if constexpr (std::is_floating_point_v<T>)
      out = static_cast<T>(std::stod(s, &used));
    else
      out = static_cast<T>(std::stoll(s, &used));
    return used == s.size();
  } catch (...) {
    return false;
  }
}

} // namespace

int main(int argc, char** argv) {
  std::string address, prompt, chat;
  bool json = false;
  tessera::sdk::options opts;
  tessera::sdk::request req;
  req.params.max_tokens = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--json") {
      json = true;
    } else if (a == "--ignore-eos") {
      req.params.ignore_eos = true;
    } else if ((a == "--connect" || a == "--cluster-secret-file" || a == "--prompt" || a == "--chat" ||
                a == "--max-tokens" || a == "--temperature" || a == "--seed" || a == "--api-key" || a == "--model") &&
               (v = value()) == nullptr) {
      return usage(a + " needs a value");
    } else if (a == "--connect") {
      address = v;
    } else if (a == "--cluster-secret-file") {
      opts.cluster_secret_file = v;
    } else if (a == "--prompt") {
      prompt = v;
    } else if (a == "--chat") {
      chat = v;
    } else if (a == "--api-key") {
      req.api_key = v;
    } else if (a == "--model") {
      req.model = v;
    } else if (a == "--max-tokens") {
      if (!parse_number(v, req.params.max_tokens) || req.params.max_tokens < 1)
        return usage("--max-tokens must be an integer >= 1, got '" + std::string{v} + "'");
    } else if (a == "--temperature") {
      if (!parse_number(v, req.params.temperature))
        return usage("--temperature must be a number, got '" + std::string{v} + "'");
    } else if (a == "--seed") {
      uint64_t seed = 0;
      if (!parse_number(v, seed))
        return usage("--seed must be an integer, got '" + std::string{v} + "'");
      req.params.seed = seed;
    } else {
      return usage("unknown argument '" + a + "'");
    }
  }
  if (address.empty())
    return usage("--connect HOST:PORT is required");
  if (prompt.empty() == chat.empty())
    return usage("give exactly one of --prompt and --chat");
  if (!chat.empty())
    req.messages = {{"user", chat}};
  else
    req.prompt = prompt;
  try {
    auto client = tessera::sdk::client::connect(address, opts);
    auto s = client->submit(req);
    if (!json) {
      while (auto c = s.next())
        std::cout << c->text << std::flush;
      std::cout << "\n";
      return 0;
    }
    auto r = s.wait();
    nlohmann::ordered_json j = {{"model", r.model},
                                {"prompt_token_ids", r.prompt_token_ids},
                                {"token_ids", r.token_ids},
                                {"text", r.text},
                                {"finish_reason", r.finish_reason}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  } catch (const tessera::sdk::error& e) {
    std::cerr << "tessera-client: " << tessera::protocol::to_string(e.code()) << " (HTTP " << e.http_status()
              << "): " << e.what() << "\n";
    return 1;
  }
}
