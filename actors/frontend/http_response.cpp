#include "actors/frontend/http_response.hpp"

#include "actors/frontend/http_outbox.hpp"
#include "common/ascii.hpp"

namespace tessera::actors::frontend {

std::optional<std::string_view> http_request::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (ascii_iequals(n, name))
      return std::string_view(v);
  return std::nullopt;
}

http_response::http_response(std::shared_ptr<detail::http_outbox> outbox, uint64_t seq)
  : outbox_(std::move(outbox)), seq_(seq) {}

http_response::~http_response() {
  outbox_->abandon(seq_, "the server dropped the request without a response");
}

void http_response::send(int status, std::string content_type, std::string body,
                         http_header_list extra_headers) {
  outbox_->send(seq_, status, std::move(content_type), std::move(body), std::move(extra_headers));
}

void http_response::start_stream(int status, std::string content_type,
                                 http_header_list extra_headers) {
  outbox_->start_stream(seq_, status, std::move(content_type), std::move(extra_headers));
}

bool http_response::write(std::string chunk) {
  return outbox_->write(seq_, std::move(chunk));
}

void http_response::finish() {
  outbox_->finish(seq_);
}

void http_response::on_close(std::function<void()> f) {
  outbox_->on_close(seq_, std::move(f));
}

bool http_response::closed() const {
  return outbox_->closed(seq_);
}

} // namespace tessera::actors::frontend
