#include "engine/added_token_matcher.hpp"

#include <algorithm>

namespace tessera::engine {

added_token_matcher::added_token_matcher(std::vector<entry> entries)
  : by_first_byte_(256) {
  std::erase_if(entries, [](const entry& e) { return e.content.empty(); });
  std::stable_sort(entries.begin(), entries.end(), [](const entry& a, const entry& b) {
    return a.content.size() > b.content.size();
  });
  entries_ = std::move(entries);
  for (uint32_t i = 0; i < entries_.size(); ++i)
    by_first_byte_[static_cast<uint8_t>(entries_[i].content[0])].push_back(i);
}

void added_token_matcher::split(std::string_view text, bool match_special,
                                const std::function<void(std::string_view)>& on_text,
                                const std::function<void(int32_t)>& on_token) const {
  if (entries_.empty()) {
    if (!text.empty())
      on_text(text);
    return;
  }
  size_t run_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const entry* hit = nullptr;
    for (uint32_t idx : by_first_byte_[static_cast<uint8_t>(text[i])]) {
      const auto& e = entries_[idx];
      if (e.special && !match_special)
        continue;
      if (text.substr(i, e.content.size()) == e.content) {
        hit = &e; // longest first: the first hit is the longest
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    if (i > run_start)
      on_text(text.substr(run_start, i - run_start));
    on_token(hit->id);
    i += hit->content.size();
    run_start = i;
  }
  if (run_start < text.size())
    on_text(text.substr(run_start));
}

} // namespace tessera::engine
