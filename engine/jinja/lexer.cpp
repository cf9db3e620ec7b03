#include "engine/jinja/lexer.hpp"

#include <cctype>
#include <cstdint>
#include <cstdlib>

namespace tessera::jinja {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/// The lexer: template text and tags, with whitespace control applied to
/// the text as jinja2 does with trim_blocks and lstrip_blocks.
class lexer {
public:
  explicit lexer(std::string_view src) : src_(src) {}

  std::vector<token> run() {
    size_t pos = 0;
    char pending = 0; // how the previous tag ended: '-', 't' (trim_blocks) or 0
    while (pos < src_.size()) {
      size_t tag = find_tag(pos);
      std::string text{src_.substr(pos, tag - pos)};
      char open_mod = 0;
      char kind = 0;
      if (tag < src_.size()) {
        kind = src_[tag + 1];
        if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+'))
          open_mod = src_[tag + 2];
      }
      // The end of the previous tag acts on the start of this text.
      if (pending == '-') {
        size_t k = 0;
        while (k < text.size() && is_ws(text[k]))
          ++k;
        text.erase(0, k);
      } else if (pending == 't') {
        if (text.starts_with("\r\n"))
          text.erase(0, 2);
        else if (text.starts_with("\n"))
          text.erase(0, 1);
      }
      // This tag acts on the end of the text.
      if (open_mod == '-') {
        while (!text.empty() && is_ws(text.back()))
          text.pop_back();
      } else if (tag < src_.size() && (kind == '%' || kind == '#') && open_mod != '+') {
        size_t k = tag;
        while (k > pos && (src_[k - 1] == ' ' || src_[k - 1] == '\t'))
          --k;
        if ((k == 0 || src_[k - 1] == '\n') && k >= pos) {
          size_t strip = tag - k;
          if (strip <= text.size())
            text.erase(text.size() - strip);
        }
      }
      if (!text.empty())
        emit(token::type::text, normalize_newlines(text), pos);
      if (tag >= src_.size())
        break;
      pos = tag + 2 + (open_mod != 0 ? 1 : 0);
      if (kind == '#') {
        size_t end = src_.find("#}", pos);
        if (end == std::string_view::npos)
          fail_at(tag, "unclosed comment '{#'");
        pending = end > pos && src_[end - 1] == '-' ? '-' : (src_[end - 1] == '+' ? 0 : 't');
        pos = end + 2;
        continue;
      }
      const bool block = kind == '%';
      emit(block ? token::type::block_begin : token::type::var_begin, {}, tag);
      pos = lex_tag(pos, block, pending);
    }
    // keep_trailing_newline=False: one trailing newline of the template goes.
    if (!out_.empty() && out_.back().t == token::type::text && src_.ends_with("\n")) {
      auto& t = out_.back().s;
      if (t.ends_with("\n"))
        t.pop_back();
      if (t.empty())
        out_.pop_back();
    }
    emit(token::type::eof, {}, src_.size());
    return std::move(out_);
  }

private:
  size_t find_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string_view::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  static std::string normalize_newlines(std::string s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\r') {
        out += '\n';
        if (i + 1 < s.size() && s[i + 1] == '\n')
          ++i;
      } else {
        out += s[i];
      }
    }
    return out;
  }

  position pos_of(size_t offset) const {
    position p;
    for (size_t i = 0; i < offset && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++p.line;
        p.column = 1;
      } else {
        ++p.column;
      }
    }
    return p;
  }

  void emit(token::type t, std::string s, size_t offset) {
    out_.push_back(token{t, std::move(s), pos_of(offset)});
  }

  [[noreturn]] void fail_at(size_t offset, const std::string& msg) const {
    jinja_error e{msg};
    locate(e, pos_of(offset));
    throw e;
  }

  /// Lexes the inside of a tag from `pos`; returns the position after its
  /// end and sets `pending` to how it ended.
  size_t lex_tag(size_t pos, bool block, char& pending) {
    int depth = 0;
    const size_t start = pos;
    while (true) {
      while (pos < src_.size() && is_ws(src_[pos]))
        ++pos;
      if (pos >= src_.size())
        fail_at(start - 2, block ? "unclosed block tag '{%'" : "unclosed expression '{{'");
      auto rest = src_.substr(pos);
      if (depth == 0) {
        std::string_view close = block ? "%}" : "}}";
        char mod = 0;
        if ((rest.starts_with("-") || rest.starts_with("+")) && rest.substr(1).starts_with(close))
          mod = rest[0];
        if (mod != 0 || rest.starts_with(close)) {
          emit(block ? token::type::block_end : token::type::var_end, {}, pos);
          pending = mod == '-' ? '-' : (block && mod != '+' ? 't' : 0);
          return pos + close.size() + (mod != 0 ? 1 : 0);
        }
      }
      const char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t n = 1;
        while (n < rest.size()
               && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_'))
          ++n;
        if (rest.substr(0, n) == "raw" && block)
          fail_at(pos, "unsupported construct '{% raw %}'");
        emit(token::type::name, std::string{rest.substr(0, n)}, pos);
        pos += n;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t n = 0;
        bool is_float = false;
        while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '_'))
          ++n;
        if (n + 1 < rest.size() && rest[n] == '.' && std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
          is_float = true;
          ++n;
          while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n])))
            ++n;
        }
        if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
          size_t m = n + 1;
          if (m < rest.size() && (rest[m] == '+' || rest[m] == '-'))
            ++m;
          if (m < rest.size() && std::isdigit(static_cast<unsigned char>(rest[m]))) {
            is_float = true;
            n = m;
            while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n])))
              ++n;
          }
        }
        std::string num;
        for (char ch : rest.substr(0, n))
          if (ch != '_')
            num += ch;
        emit(is_float ? token::type::floating : token::type::integer, num, pos);
        pos += n;
      } else if (c == '\'' || c == '"') {
        pos = lex_string(pos, c);
      } else {
        static constexpr std::string_view two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (auto t : two)
          if (rest.starts_with(t))
            op = t;
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{}.,:|").find(c) == std::string_view::npos)
            fail_at(pos, std::string("unexpected character '") + c + "' in a tag");
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{")
          ++depth;
        else if (op == ")" || op == "]" || op == "}")
          --depth;
        emit(token::type::op, op, pos);
        pos += op.size();
      }
    }
  }

  size_t lex_string(size_t pos, char quote) {
    const size_t start = pos;
    std::string s;
    ++pos;
    while (true) {
      if (pos >= src_.size())
        fail_at(start, "unterminated string literal");
      char c = src_[pos];
      if (c == quote)
        break;
      if (c == '\\' && pos + 1 < src_.size()) {
        char n = src_[pos + 1];
        pos += 2;
        switch (n) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case '0': s += '\0'; break;
          case '\\': s += '\\'; break;
          case '\'': s += '\''; break;
          case '"': s += '"'; break;
          case '\n': break;
          case 'x':
          case 'u':
          case 'U': {
            size_t len = n == 'x' ? 2 : n == 'u' ? 4 : 8;
            if (pos + len > src_.size())
              fail_at(pos, "bad escape in a string literal");
            auto hex = std::string{src_.substr(pos, len)};
            char* end = nullptr;
            auto cp = static_cast<uint32_t>(std::strtoul(hex.c_str(), &end, 16));
            if (end != hex.c_str() + len || cp > 0x10FFFF)
              fail_at(pos, "bad escape in a string literal");
            pos += len;
            append_utf8(s, cp);
            break;
          }
          default:
            s += '\\';
            s += n;
        }
        continue;
      }
      s += c;
      ++pos;
    }
    emit(token::type::string, std::move(s), start);
    return pos + 1;
  }

  static void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string_view src_;
  std::vector<token> out_;
};

} // namespace

std::vector<token> lex(std::string_view source) { return lexer(source).run(); }

} // namespace tessera::jinja
