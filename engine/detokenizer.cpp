#include "engine/detokenizer.hpp"

#include "engine/utf8.hpp"

namespace tessera::engine {

incremental_detokenizer::incremental_detokenizer(const tokenizer& tok, bool skip_special,
                                                 bool at_sequence_start)
  : tok_(&tok),
    skip_special_(skip_special),
    strip_leading_space_(at_sequence_start && tok.strips_leading_space()) {}

std::string incremental_detokenizer::push(int32_t id) {
  if (skip_special_ && tok_->is_special(id))
    return {};
  auto bytes = tok_->token_bytes(id);
  if (bytes.empty())
    return {};
  std::string_view view = bytes;
  // Mirrors tokenizer::decode: only the first non-empty piece loses its space.
  if (strip_leading_space_) {
    strip_leading_space_ = false;
    if (view.front() == ' ')
      view.remove_prefix(1);
  }
  pending_.append(view);
  std::string out;
  auto used = utf8_append_valid(pending_, out, false);
  pending_.erase(0, used);
  return out;
}

std::string incremental_detokenizer::finish() {
  std::string out;
  utf8_append_valid(pending_, out, true);
  pending_.clear();
  return out;
}

} // namespace tessera::engine
