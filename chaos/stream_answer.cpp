#include "chaos/stream_answer.hpp"

#include <nlohmann/json.hpp>

namespace tessera::chaos {

void stream_answer::on_body(std::string_view bytes) {
  any_bytes_ = any_bytes_ || !bytes.empty();
  if (status_ != 200) {
    error_body_.append(bytes.substr(0, max_error_body - std::min(error_body_.size(), max_error_body)));
    return;
  }
  for (const auto& data : parser_.feed(bytes)) {
    if (data == "[DONE]") {
      done_ = true;
      continue;
    }
    auto j = nlohmann::json::parse(data, nullptr, false);
    if (!j.is_object()) {
      if (error_event_.empty())
        error_event_ = "an event that is not JSON: " + data.substr(0, 100);
      continue;
    }
    if (auto e = j.find("error"); e != j.end()) {
      if (error_event_.empty())
        error_event_ = e->is_object() && e->contains("message") && (*e)["message"].is_string()
                         ? (*e)["message"].get<std::string>()
                         : e->dump();
      continue;
    }
    auto c = j.find("choices");
    if (c == j.end() || !c->is_array() || c->empty() || !(*c)[0].is_object())
      continue; // the usage chunk, or one without choices
    const auto& choice = (*c)[0];
    if (auto t = choice.find("text"); t != choice.end() && t->is_string())
      text_ += t->get<std::string>();
    if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string())
      finish_ = f->get<std::string>();
  }
}

std::string stream_answer::error(const std::string& client_error) const {
  if (status_ != 0 && status_ != 200)
    return "HTTP " + std::to_string(status_) + (error_body_.empty() ? "" : ": " + error_body_);
  if (!error_event_.empty())
    return "error event: " + error_event_;
  if (!client_error.empty())
    return client_error;
  if (!done_)
    return "the stream ended without [DONE]";
  return {};
}

} // namespace tessera::chaos
