#include "actors/frontend/http_outbox.hpp"

#include <cstdio>
#include <utility>

#include "common/ascii.hpp"
#include "common/assert.hpp"

namespace tessera::actors::frontend::detail {
namespace {

// RFC 9110 token characters: what a header name may consist of.
bool is_token(std::string_view s) {
  if (s.empty())
    return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok)
      return false;
  }
  return true;
}

// A value with CR or LF would let it end the header early (response splitting).
bool is_field_value(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

void check_response(int status, std::string_view content_type, const http_header_list& extra) {
  TESSERA_ASSERT(status >= 200 && status <= 599, "http_response: status outside 200-599");
  TESSERA_ASSERT(is_field_value(content_type), "http_response: content type with CR, LF or NUL");
  for (const auto& [name, value] : extra) {
    TESSERA_ASSERT(is_token(name), "http_response: header name is not a token");
    TESSERA_ASSERT(is_field_value(value), "http_response: header value with CR, LF or NUL");
    TESSERA_ASSERT(!ascii_iequals(name, "Content-Length") &&
                     !ascii_iequals(name, "Transfer-Encoding") &&
                     !ascii_iequals(name, "Connection") && !ascii_iequals(name, "Content-Type"),
                   "http_response: the server sets Content-Type, Content-Length, "
                   "Transfer-Encoding and Connection itself");
  }
}

bool has_header(const http_header_list& headers, std::string_view name) {
  for (const auto& h : headers)
    if (ascii_iequals(h.first, name))
      return true;
  return false;
}

// The status line and header fields up to, not including, the blank line.
std::string head_start(int status, std::string_view content_type, const http_header_list& extra) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " ";
  out += http_reason(status);
  out += "\r\n";
  if (!content_type.empty()) {
    out += "Content-Type: ";
    out += content_type;
    out += "\r\n";
  }
  for (const auto& [name, value] : extra) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
  return out;
}

void connection_header(std::string& out, const http_request_info& info, bool keep_alive) {
  if (!keep_alive)
    out += "Connection: close\r\n";
  else if (!info.http11)
    out += "Connection: keep-alive\r\n";
}

} // namespace

std::string http_json_error(std::string_view message, std::string_view type) {
  std::string out = R"({"error":{"message":")";
  for (char c : message) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += R"(","type":")";
  out += type;
  out += R"(","param":null,"code":null}})";
  return out;
}

std::string_view http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

http_outbox::http_outbox(std::size_t max_queued_bytes) : max_queued_bytes_(max_queued_bytes) {}

http_outbox::~http_outbox() = default;

void http_outbox::send(uint64_t seq, int status, std::string content_type, std::string body,
                       http_header_list extra_headers) {
  std::vector<std::function<void()>> released;
  std::lock_guard lock(mu_);
  if (closed_)
    return;
  TESSERA_ASSERT(seq == seq_ && phase_ == phase::none,
                 "http_response::send after the response was sent or started");
  check_response(status, content_type, extra_headers);
  auto head = head_start(status, content_type, extra_headers);
  bool no_body = status == 204 || status == 304;
  if (!no_body)
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  connection_header(head, info_, info_.keep_alive);
  head += "\r\n";
  if (!no_body && !info_.head)
    head += body;
  push_locked({std::move(head), true, !info_.keep_alive});
  released = complete_locked();
  // `released` is destroyed after `lock` (declared before it).
}

void http_outbox::start_stream(uint64_t seq, int status, std::string content_type,
                               http_header_list extra_headers) {
  std::lock_guard lock(mu_);
  if (closed_)
    return;
  TESSERA_ASSERT(seq == seq_ && phase_ == phase::none,
                 "http_response::start_stream after the response was sent or started");
  TESSERA_ASSERT(status != 204 && status != 304, "http_response: a 204 or 304 has no stream");
  check_response(status, content_type, extra_headers);
  auto head = head_start(status, content_type, extra_headers);
  bool sse = content_type.starts_with("text/event-stream");
  if (sse && !has_header(extra_headers, "Cache-Control"))
    head += "Cache-Control: no-cache\r\n";
  // HTTP/1.0 has no chunked coding: the body ends where the connection does.
  if (info_.http11)
    head += "Transfer-Encoding: chunked\r\n";
  else
    info_.keep_alive = false;
  connection_header(head, info_, info_.keep_alive);
  head += "\r\n";
  push_locked({std::move(head)});
  phase_ = phase::streaming;
}

bool http_outbox::write(uint64_t seq, std::string chunk) {
  std::lock_guard lock(mu_);
  if (closed_ || seq != seq_ || phase_ == phase::complete)
    return false;
  TESSERA_ASSERT(phase_ == phase::streaming, "http_response::write before start_stream");
  // A zero-size chunk would end the chunked body.
  if (chunk.empty() || info_.head)
    return true;
  std::string framed;
  if (info_.http11) {
    char size[20];
    int n = std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    framed.reserve(static_cast<std::size_t>(n) + chunk.size() + 2);
    framed.append(size, static_cast<std::size_t>(n));
    framed += chunk;
    framed += "\r\n";
  } else {
    framed = std::move(chunk);
  }
  if (queued_bytes_ + framed.size() > max_queued_bytes_) {
    // The client reads slower than we produce: drop it rather than buffer
    // without bound. The callbacks run when the strand closes the socket.
    closed_ = true;
    pending_.clear();
    wake_close();
    return false;
  }
  push_locked({std::move(framed)});
  return true;
}

void http_outbox::finish(uint64_t seq) {
  std::vector<std::function<void()>> released;
  std::lock_guard lock(mu_);
  if (closed_ || seq != seq_ || phase_ == phase::complete)
    return;
  TESSERA_ASSERT(phase_ == phase::streaming, "http_response::finish before start_stream");
  bool chunked = info_.http11 && !info_.head;
  push_locked({chunked ? "0\r\n\r\n" : "", true, !info_.keep_alive});
  released = complete_locked();
}

void http_outbox::on_close(uint64_t seq, std::function<void()> f) {
  {
    std::lock_guard lock(mu_);
    // Complete (now or before this seq's successor began): f never runs;
    // it is destroyed below, unlocked.
    if (seq != seq_ || phase_ == phase::complete)
      return;
    if (!closed_) {
      on_close_.push_back(std::move(f));
      return;
    }
  }
  if (f)
    f();
}

bool http_outbox::closed(uint64_t seq) const {
  std::lock_guard lock(mu_);
  return closed_ || seq != seq_ || phase_ == phase::complete;
}

bool http_outbox::unwritten() const {
  std::lock_guard lock(mu_);
  return !closed_ && queued_bytes_ > 0;
}

void http_outbox::abandon(uint64_t seq, std::string_view what) {
  std::vector<std::function<void()>> released;
  std::lock_guard lock(mu_);
  if (seq != seq_ || phase_ == phase::complete || closed_)
    return;
  if (phase_ == phase::none) {
    auto body = http_json_error(what, "server_error");
    std::string head = "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                       "Content-Length: " +
                       std::to_string(body.size()) + "\r\n";
    connection_header(head, info_, info_.keep_alive);
    head += "\r\n";
    if (!info_.head)
      head += body;
    push_locked({std::move(head), true, !info_.keep_alive});
  } else {
    // A started stream cannot be turned into an error: cut it off.
    closed_ = true;
    pending_.clear();
    wake_close();
  }
  released = complete_locked();
}

uint64_t http_outbox::begin_response(http_request_info info) {
  std::lock_guard lock(mu_);
  ++seq_;
  phase_ = phase::none;
  info_ = info;
  return seq_;
}

void http_outbox::queue_error_response(int status, std::string_view message) {
  auto body = http_json_error(message, "invalid_request_error");
  std::string out = head_start(status, "application/json", {});
  out += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  out += body;
  std::lock_guard lock(mu_);
  if (!closed_)
    push_locked({std::move(out), true, true});
}

void http_outbox::queue_continue() {
  std::lock_guard lock(mu_);
  if (!closed_)
    push_locked({"HTTP/1.1 100 Continue\r\n\r\n"});
}

bool http_outbox::take(std::deque<http_out_item>& out) {
  std::lock_guard lock(mu_);
  flush_posted_ = false;
  if (closed_)
    return false;
  for (auto& item : pending_)
    out.push_back(std::move(item));
  pending_.clear();
  return true;
}

void http_outbox::written(std::size_t n) {
  std::lock_guard lock(mu_);
  queued_bytes_ = n < queued_bytes_ ? queued_bytes_ - n : 0;
}

std::vector<std::function<void()>> http_outbox::mark_closed() {
  std::lock_guard lock(mu_);
  closed_ = true;
  pending_.clear();
  queued_bytes_ = 0;
  // Empty unless a response is in progress (complete_locked clears it).
  std::vector<std::function<void()>> out = std::move(on_close_);
  on_close_.clear();
  return out;
}

void http_outbox::push_locked(http_out_item item) {
  queued_bytes_ += item.bytes.size();
  pending_.push_back(std::move(item));
  if (!flush_posted_) {
    flush_posted_ = true;
    wake_flush();
  }
}

std::vector<std::function<void()>> http_outbox::complete_locked() {
  phase_ = phase::complete;
  std::vector<std::function<void()>> out = std::move(on_close_);
  on_close_.clear();
  return out;
}

} // namespace tessera::actors::frontend::detail
