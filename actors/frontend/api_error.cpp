#include "actors/frontend/api_error.hpp"

#include <utility>

namespace tessera::actors::frontend {

namespace {

api_error make(int status, std::string type, std::string message, std::string code) {
  api_error e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

std::string with_detail(std::string text, std::string_view detail) {
  if (!detail.empty()) {
    text += ": ";
    text += detail;
  }
  return text;
}

} // namespace

std::string quote_input(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes)
    return std::string{text};
  size_t cut = max_bytes;
  // Back off continuation bytes (10xxxxxx) so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return std::string{text.substr(0, cut)} + "... (" + std::to_string(text.size()) + " bytes)";
}

api_error bad_request(std::string message, std::string param) {
  api_error e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

api_error body_too_large(size_t body_bytes, size_t limit_bytes) {
  return make(413, "invalid_request_error",
              "request body is " + std::to_string(body_bytes) + " bytes, more than the limit of "
                + std::to_string(limit_bytes) + " bytes",
              "body_too_large");
}

api_error unknown_model(std::string_view model) {
  auto e = make(404, "invalid_request_error",
                "The model `" + quote_input(model) + "` does not exist.", "model_not_found");
  e.param = "model";
  return e;
}

api_error queue_full(std::string_view detail) {
  return make(429, "rate_limit_exceeded",
              with_detail("the server's request queue is full; retry later", detail),
              "queue_full");
}

api_error no_worker(std::string_view detail) {
  return make(503, "service_unavailable",
              with_detail("no worker is available to serve the request", detail), "no_worker");
}

api_error shutting_down(std::string_view detail) {
  return make(503, "service_unavailable", std::string{"the server is shutting down: "} + std::string{detail},
              "shutting_down");
}

api_error internal_error(std::string message) {
  return make(500, "internal_error", std::move(message), {});
}

} // namespace tessera::actors::frontend
