#include "common/chat/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "common/chat/py_string.h"
#include "common/chat/template_error.h"

namespace tessera::chat {
namespace {

// Longest first, so that "//" wins over "/".
constexpr const char* kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                      "/",  "%",  "~",  "<",  ">",  "=",  ".", ":", "|",
                                      ",",  "(",  ")",  "[",  "]",  "{",  "}", ";"};

// Newlines become "\n" and one trailing newline goes, as Jinja2's lexer does.
std::string Normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's \s* from `pos`: the position after the whitespace.
size_t SkipSpace(const std::string& s, size_t pos) {
  while (pos < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c < 0x80) {
      if (!IsPySpace(c)) break;
      ++pos;
      continue;
    }
    size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    std::u32string cp = DecodeUtf8(std::string_view(s).substr(pos, len));
    if (cp.size() != 1 || !IsPySpace(cp[0])) break;
    pos += len;
  }
  return pos;
}

std::string RStripSpace(std::string_view s) {
  return PyStrip(s, std::nullopt, /*left=*/false, /*right=*/true);
}

bool IsAllSpace(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t cp : DecodeUtf8(s)) {
    if (!IsPySpace(cp)) return false;
  }
  return true;
}

// Python's "unicode-escape" decoding of a string literal's body (Jinja2 decodes literals so).
std::string Unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 >= body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    auto hex = [&](int digits) -> char32_t {
      if (i + digits >= body.size()) {
        throw TemplateError("truncated \\x/\\u escape in string literal", line);
      }
      char32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        char h = body[i + 1 + k];
        int d = (h >= '0' && h <= '9')   ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) throw TemplateError("malformed \\x/\\u escape in string literal", line);
        v = v * 16 + d;
      }
      i += digits;
      return v;
    };
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
      case '\'':
      case '"':
        out.push_back(e);
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
        AppendUtf8(hex(2), &out);
        break;
      case 'u':
        AppendUtf8(hex(4), &out);
        break;
      case 'U':
        AppendUtf8(hex(8), &out);
        break;
      case 'N':
        // \N{NAME} needs Unicode's name table; refuse rather than render it wrongly.
        throw TemplateError("unsupported: \\N{...} escape in string literal", line);
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = e - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7';
               ++k) {
            v = v * 8 + (body[++i] - '0');
          }
          AppendUtf8(v, &out);
        } else {
          out.push_back('\\');  // unknown escapes stay as written
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(Normalize(source)) {}

  std::vector<Token> Run() {
    while (pos_ < src_.size()) {
      size_t tag = FindTag(pos_);
      if (tag == std::string::npos) {
        EmitText(src_.substr(pos_), line_);
        break;
      }
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      std::string text = src_.substr(pos_, tag - pos_);
      int text_line = line_;
      if (sign == '-') {
        text = RStripSpace(text);
      } else if (sign != '+' && kind != '{') {
        text = LStripBlock(text);
      }
      EmitText(std::move(text), text_line);
      Advance(tag);
      size_t body = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        Comment(body);
      } else if (kind == '%' && IsRaw(body)) {
        Raw(body);
      } else {
        Tag(kind == '%', body);
      }
    }
    tokens_.push_back(Token{TokenType::kEof, "", 0, 0, line_});
    return std::move(tokens_);
  }

 private:
  size_t FindTag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#'))
        return p;
    }
    return std::string::npos;
  }

  // lstrip_blocks: drop the spaces between the line start and a block/comment tag when
  // nothing else is on that line before it.
  std::string LStripBlock(const std::string& text) const {
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && IsAllSpace(std::string_view(text).substr(l_pos))) {
      return text.substr(0, l_pos);
    }
    return text;
  }

  void EmitText(std::string text, int line) {
    if (!text.empty()) tokens_.push_back(Token{TokenType::kText, std::move(text), 0, 0, line});
  }

  // Moves to `to`, counting lines and remembering whether the consumed text ended a line.
  void Advance(size_t to) {
    if (to > pos_) {
      line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + to, '\n'));
      line_starting_ = src_[to - 1] == '\n';
    }
    pos_ = to;
  }

  // After a block or comment tag: `-` eats all whitespace, `+` none, otherwise one newline.
  void AfterBlockEnd(size_t after, char sign) {
    size_t to = after;
    if (sign == '-') {
      to = SkipSpace(src_, after);
    } else if (sign != '+' && after < src_.size() && src_[after] == '\n') {
      to = after + 1;
    }
    Advance(to);
  }

  void Comment(size_t body) {
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) throw TemplateError("missing end of comment tag", line_);
    char sign = end > body ? src_[end - 1] : '\0';
    AfterBlockEnd(end + 2, sign);
  }

  bool IsRaw(size_t body) const {
    size_t p = SkipSpace(src_, body);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipSpace(src_, p + 3);
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  void Raw(size_t body) {
    size_t p = SkipSpace(src_, body) + 3;
    p = SkipSpace(src_, p);
    bool strip = src_[p] == '-';
    p += strip ? 3 : 2;
    if (strip) p = SkipSpace(src_, p);
    // Find {% endraw %} with optional signs and spaces.
    for (size_t s = src_.find("{%", p); s != std::string::npos; s = src_.find("{%", s + 2)) {
      size_t q = s + 2;
      char sign = q < src_.size() ? src_[q] : '\0';
      if (sign == '-' || sign == '+') ++q;
      q = SkipSpace(src_, q);
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q = SkipSpace(src_, q + 6);
      char end_sign = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(p, s - p);
      int text_line = line_;
      if (sign == '-') {
        text = RStripSpace(text);
      } else if (sign != '+') {
        text = LStripBlock(text);
      }
      EmitText(std::move(text), text_line);
      Advance(s);
      AfterBlockEnd(q + 2, end_sign);
      return;
    }
    throw TemplateError("missing {% endraw %} for {% raw %}", line_);
  }

  void Tag(bool block, size_t body) {
    int begin_line = line_;
    tokens_.push_back(
        Token{block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", 0, 0, begin_line});
    size_t p = body;
    int depth = 0;
    while (true) {
      size_t q = SkipSpace(src_, p);
      line_ += static_cast<int>(std::count(src_.begin() + p, src_.begin() + q, '\n'));
      p = q;
      if (p >= src_.size()) {
        throw TemplateError(
            std::string("unexpected end of template: missing '") + (block ? "%}" : "}}") + "'",
            begin_line);
      }
      if (depth == 0) {
        if (block) {
          char sign = src_[p];
          size_t after_sign = (sign == '-' || sign == '+') ? p + 1 : p;
          if (src_.compare(after_sign, 2, "%}") == 0) {
            tokens_.push_back(Token{TokenType::kBlockEnd, "", 0, 0, line_});
            pos_ = p;
            AfterBlockEnd(after_sign + 2, after_sign == p ? '\0' : sign);
            return;
          }
        } else {
          bool minus = src_[p] == '-';
          size_t after_sign = minus ? p + 1 : p;
          if (src_.compare(after_sign, 2, "}}") == 0) {
            tokens_.push_back(Token{TokenType::kVarEnd, "", 0, 0, line_});
            pos_ = p;
            size_t to = after_sign + 2;
            if (minus) to = SkipSpace(src_, to);
            Advance(to);
            return;
          }
        }
      }
      p = Lex(p, &depth);
    }
  }

  // Lexes one expression token at `p`; returns the position after it.
  size_t Lex(size_t p, int* depth) {
    char c = src_[p];
    Token tok{TokenType::kName, "", 0, 0, line_};
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = p;
      while (e < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
        ++e;
      tok.text = src_.substr(p, e - p);
      tokens_.push_back(std::move(tok));
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return LexNumber(p);
    if (c == '\'' || c == '"') {
      size_t e = p + 1;
      while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
      if (e >= src_.size()) throw TemplateError("unterminated string literal", line_);
      tok.type = TokenType::kString;
      tok.text = Unescape(std::string_view(src_).substr(p + 1, e - p - 1), line_);
      line_ += static_cast<int>(std::count(src_.begin() + p, src_.begin() + e, '\n'));
      tokens_.push_back(std::move(tok));
      return e + 1;
    }
    for (const char* op : kOperators) {
      size_t len = std::strlen(op);
      if (src_.compare(p, len, op) == 0) {
        if (len == 1 && (c == '(' || c == '[' || c == '{')) ++*depth;
        if (len == 1 && (c == ')' || c == ']' || c == '}')) {
          if (*depth == 0) throw TemplateError(std::string("unexpected '") + c + "'", line_);
          --*depth;
        }
        tok.type = TokenType::kOperator;
        tok.text = op;
        tokens_.push_back(std::move(tok));
        return p + len;
      }
    }
    throw TemplateError(std::string("unexpected character '") + c + "' in tag", line_);
  }

  size_t LexNumber(size_t p) {
    auto digits = [&](size_t q) {
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[q + 1])))))
        ++q;
      return q;
    };
    size_t e = digits(p);
    bool is_float = false;
    // After `.` (as in `items.0`) a number is an integer index, never a float.
    bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::kOperator &&
                     tokens_.back().text == ".";
    if (!after_dot && e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        e = digits(q);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token tok{is_float ? TokenType::kFloat : TokenType::kInt, text, 0, 0, line_};
    if (is_float) {
      // Python's float() of a too-large literal is inf, of a too-small one 0.0.
      tok.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      try {
        tok.int_value = ParseDecimal(text, "integer literal");
      } catch (TemplateError& e) {
        e.set_line(line_);
        throw;
      }
    }
    tokens_.push_back(std::move(tok));
    return e;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) { return Lexer(source).Run(); }

}  // namespace tessera::chat
