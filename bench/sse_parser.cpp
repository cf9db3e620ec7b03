#include "bench/sse_parser.hpp"

#include <nlohmann/json.hpp>

namespace tessera::bench {

std::vector<std::string> sse_parser::feed(std::string_view bytes) {
  std::vector<std::string> out;
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n')
        continue; // the "\n" of a "\r\n" that ended the line already
    }
    if (c == '\r' || c == '\n') {
      after_cr_ = c == '\r';
      end_line(out);
    } else {
      line_ += c;
    }
  }
  return out;
}

void sse_parser::end_line(std::vector<std::string>& out) {
  if (line_.empty()) {
    if (has_data_)
      out.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  std::string_view line{line_};
  const auto colon = line.find(':');
  if (colon != 0) { // a line starting with ':' is a comment
    const auto field = line.substr(0, colon);
    std::string_view value;
    if (colon != std::string_view::npos) {
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ')
        value.remove_prefix(1);
    }
    if (field == "data") {
      if (has_data_)
        data_ += '\n';
      data_ += value;
      has_data_ = true;
    }
  }
  line_.clear();
}

completion_event parse_completion_event(std::string_view data) {
  using json = nlohmann::json;
  completion_event e;
  if (data == "[DONE]") {
    e.kind = completion_event_kind::done;
    return e;
  }
  json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    e.message = "not a JSON object: " + std::string{data.substr(0, 120)};
    return e;
  }
  if (auto err = j.find("error"); err != j.end() && !err->is_null()) {
    e.kind = completion_event_kind::error;
    if (err->is_object() && err->contains("message") && (*err)["message"].is_string())
      e.message = (*err)["message"].get<std::string>();
    else
      e.message = err->dump();
    return e;
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array()) {
    e.message = "no choices array: " + std::string{data.substr(0, 120)};
    return e;
  }
  e.kind = completion_event_kind::empty;
  if (!choices->empty() && choices->front().is_object()) {
    const auto& c = choices->front();
    if (auto f = c.find("finish_reason"); f != c.end() && f->is_string())
      e.finish_reason = f->get<std::string>();
    const json* text = nullptr;
    if (auto t = c.find("text"); t != c.end())
      text = &*t;
    else if (auto d = c.find("delta"); d != c.end() && d->is_object())
      if (auto t2 = d->find("content"); t2 != d->end())
        text = &*t2;
    if (text != nullptr && text->is_string() && !text->get_ref<const std::string&>().empty()) {
      e.kind = completion_event_kind::text;
      e.text_bytes = text->get_ref<const std::string&>().size();
      return e;
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    e.kind = completion_event_kind::usage;
    if (auto n = u->find("completion_tokens"); n != u->end() && n->is_number_integer())
      e.completion_tokens = n->get<int64_t>();
    if (auto n = u->find("prompt_tokens"); n != u->end() && n->is_number_integer())
      e.prompt_tokens = n->get<int64_t>();
    if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object())
      if (auto n = d->find("cached_tokens"); n != d->end() && n->is_number_integer())
        e.cached_tokens = n->get<int64_t>();
  }
  return e;
}

} // namespace tessera::bench
