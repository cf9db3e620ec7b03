#pragma once
/// @file
/// The Tessera C++ client SDK: a program talks to a cluster's frontend over
/// the cluster wire (UCX, the cluster secret's handshake), with no HTTP,
/// JSON or server-sent events in between. A request runs exactly as the
/// same request through the HTTP API (same tokens, same errors).
///
///   auto c = tessera::sdk::client::connect("10.0.0.7:13337",
///                                          {.cluster_secret_file = "cluster.secret"});
///   tessera::sdk::request r;
///   r.prompt = "Once upon a time";
///   r.params.max_tokens = 32;
///   auto s = c->submit(r);
///   while (auto ch = s.next())    // blocking; or submit(r, on_chunk), or complete(r).get()
///     std::cout << ch->text;
///
/// Thread-safe: any number of threads may submit on one client; a stream
/// is read by one thread at a time. Every failure is a tessera::sdk::error
/// carrying the HTTP API's status, type and message.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/client.hpp"
#include "protocol/request.hpp"

namespace tessera::sdk {

using protocol::chat_message;
using protocol::client_errc;
using protocol::cluster_info;
using protocol::sampled_token;
using protocol::sampling_params;
using protocol::token_logprob;

/// A failed call: what kind, and exactly what the HTTP API would have said.
class error : public std::runtime_error {
public:
  error(client_errc code, int http_status, std::string message, std::string type = {},
        std::string error_code = {}, std::string param = {});
  [[nodiscard]] client_errc code() const { return code_; }
  [[nodiscard]] int http_status() const { return status_; }
  /// OpenAI's error "type", its "code" and "param" (empty for none).
  [[nodiscard]] const std::string& type() const { return type_; }
  [[nodiscard]] const std::string& error_code() const { return error_code_; }
  [[nodiscard]] const std::string& param() const { return param_; }
  /// The HTTP API's message. Held in a string of the error's own (the
  /// runtime_error base gets none): libstdc++ shares a runtime_error's
  /// message between copies with a reference count, and a stream's error
  /// is copied to the thread that reads it while the receive thread may
  /// drop the original.
  [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }

private:
  client_errc code_;
  int status_;
  std::string message_, type_, error_code_, param_;
};

/// How to reach and join the cluster.
struct options {
  /// The cluster secret, or the file holding it (mode 600, as the nodes
  /// read it). One of the two unless the cluster runs --insecure.
  std::string cluster_secret;
  std::filesystem::path cluster_secret_file;
  /// This client's node id; must be unique in the cluster. Default:
  /// "sdk-" and 16 random hex digits.
  std::string node_id;
  /// The frontend's actor name. Default: "frontend".
  std::string frontend = "frontend";
  /// UCX transports. Default: "tcp".
  std::string ucx_tls = "tcp";
  /// Connecting and the handshake. Default: 10 s.
  std::chrono::milliseconds connect_timeout{10000};
  /// Longest wait for a request's acceptance or next chunk, and for
  /// models()/health(). Default: 60 s.
  std::chrono::milliseconds timeout{60000};
};

/// A completion request. Exactly one of prompt_ids, prompt, messages.
struct request {
  std::vector<int32_t> prompt_ids;
  std::string prompt;
  std::vector<chat_message> messages;
  /// Empty: the served model.
  std::string model;
  sampling_params params;
  int32_t priority = 0;
  /// The tenant's API key when the cluster has keys.
  std::string api_key;
  /// Chunks carry text. Default: true.
  bool detokenize = true;
  /// Each generated token comes with its log-probability (chunk::logprobs):
  /// the HTTP API's `logprobs`, the same values. Sets params.logprobs to
  /// top_logprobs; when false, params.logprobs is sent as it is (nullopt:
  /// none). Default: false.
  bool logprobs = false;
  /// With logprobs: also the N most likely tokens at each step, 0..20
  /// (sampling_params::max_logprobs), as the HTTP API's chat `top_logprobs`
  /// and completions `logprobs: N`. Non-zero without logprobs is refused.
  /// Default: 0.
  int32_t top_logprobs = 0;
};

/// Tokens of one step, in order.
struct chunk {
  std::vector<int32_t> tokens;
  std::string text;
  /// "", or "stop", "length", "abort" on the last chunk.
  std::string finish_reason;
  /// The stop string that ended it, if one did.
  std::string stop_reason;
  int32_t prompt_tokens = 0;
  int32_t cached_prompt_tokens = 0;
  int32_t output_tokens = 0;
  /// One per token when the request asked for logprobs, else empty: the
  /// token, its log-probability under the raw model distribution (-inf
  /// possible) and the top_logprobs most likely tokens, most likely first.
  std::vector<sampled_token> logprobs;
};

/// A whole answer.
struct result {
  std::string model;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;
  std::string text;
  std::string finish_reason;
  int32_t cached_prompt_tokens = 0;
  /// One per token of token_ids when logprobs were asked, else empty.
  std::vector<sampled_token> logprobs;
};

namespace detail {
class client_impl;
struct stream_state;
} // namespace detail

class client;

/// One submitted request's answer as it arrives.
class stream {
public:
  /// The next chunk (blocks); nullopt after the last one. Throws error on
  /// failure (and after options::timeout without news). Not with an
  /// on_chunk callback.
  std::optional<chunk> next();
  /// Waits at most `max_wait` until next() (or wait(), when the request
  /// ended) would not block: a chunk, the end, a failure, or
  /// options::timeout without news is there. For callers that must wake
  /// up meanwhile (a Python binding checking for Ctrl-C). Never throws.
  bool wait_for(std::chrono::milliseconds max_wait);
  /// Whether the request ended (finished, failed or cancelled).
  [[nodiscard]] bool done() const;
  /// Waits for the end; the whole answer. Throws error.
  result wait();
  /// Stops the request (frees it on the workers); next() then throws
  /// error(cancelled). No effect once it ended.
  void cancel();
  /// The client's id of the request.
  [[nodiscard]] uint64_t id() const;

private:
  friend class client;
  std::shared_ptr<detail::stream_state> state_;
  std::shared_ptr<detail::client_impl> client_;
};

/// Called for each chunk, on the SDK's receive thread (must not block).
using chunk_callback = std::function<void(const chunk&)>;

/// A connection to a cluster's frontend.
class client {
public:
  /// Connects to the frontend node at `address` ("host:port", its cluster
  /// address). Throws error (unauthorized: the secret was refused;
  /// unavailable: nobody answered; bad_request: unusable options).
  [[nodiscard]] static std::unique_ptr<client> connect(const std::string& address, options opts = {});
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Submits `r`. Throws error when it cannot be sent; its refusal
  /// (a bad field, a wrong key, a rate limit) comes out of the stream.
  /// With `on_chunk`, chunks go there instead of next().
  stream submit(request r, chunk_callback on_chunk = {});
  /// The whole answer, later.
  std::future<result> complete(request r);
  /// The served models.
  std::vector<std::string> models();
  /// Whether the cluster can serve now, its workers and limits.
  cluster_info health();
  /// This client's node id.
  [[nodiscard]] const std::string& node_id() const;

private:
  explicit client(std::shared_ptr<detail::client_impl> impl);
  std::shared_ptr<detail::client_impl> impl_;
};

} // namespace tessera::sdk
