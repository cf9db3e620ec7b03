#include "engine/regex_splitter.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "engine/engine_errc.hpp"

namespace tessera::engine {

struct regex_splitter::impl {
  pcre2_code* code = nullptr;
  ~impl() {
    if (code != nullptr)
      pcre2_code_free(code);
  }
};

regex_splitter::regex_splitter(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
regex_splitter::regex_splitter(regex_splitter&&) noexcept = default;
regex_splitter& regex_splitter::operator=(regex_splitter&&) noexcept = default;
regex_splitter::~regex_splitter() = default;

caf::expected<regex_splitter> regex_splitter::compile(std::string_view pattern, bool literal) {
  // PCRE2_LITERAL admits no pattern-syntax options such as UCP.
  uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
  int err = 0;
  PCRE2_SIZE offset = 0;
  auto* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             options, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof(buf));
    return make_engine_error(engine_errc::bad_tokenizer,
                             "bad regex at offset " + std::to_string(offset) + ": " +
                               reinterpret_cast<const char*>(buf));
  }
  // JIT is an optimisation only: without it pcre2_match interprets.
  (void) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  auto p = std::make_unique<impl>();
  p->code = code;
  return regex_splitter{std::move(p)};
}

void regex_splitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty())
    return;
  auto* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (md == nullptr) {
    out.push_back(text);
    return;
  }
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  size_t gap_start = 0;
  while (pos < text.size()) {
    // The caller guarantees valid UTF-8; checking it on every call would
    // make splitting quadratic in the text length.
    int rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0)
      break; // no match (or a matcher limit): the rest is one gap
    auto* ov = pcre2_get_ovector_pointer(md);
    size_t begin = ov[0];
    size_t end = ov[1];
    if (end <= begin) {
      // An empty match isolates nothing; step over one character.
      size_t next = begin + 1;
      while (next < text.size() && (static_cast<uint8_t>(text[next]) & 0xC0) == 0x80)
        ++next;
      pos = next;
      continue;
    }
    if (begin > gap_start)
      out.push_back(text.substr(gap_start, begin - gap_start));
    out.push_back(text.substr(begin, end - begin));
    pos = end;
    gap_start = end;
  }
  if (gap_start < text.size())
    out.push_back(text.substr(gap_start));
  pcre2_match_data_free(md);
}

} // namespace tessera::engine
