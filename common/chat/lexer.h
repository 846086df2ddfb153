// Splits a Jinja2 template into tokens, applying whitespace control exactly as Jinja2's lexer
// does with HuggingFace's settings (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False): `{%-`/`-%}`/`{{-`/`-}}` strip all whitespace on that side,
// `{%+`/`+%}` keep it, a block or comment tag alone on its line loses the indentation before
// it, and the first newline after a block or comment tag is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::chat {

enum class TokenType {
  kText,        // template data between tags (after whitespace control)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,  // text holds the decoded value
  kInt,
  kFloat,
  kOperator,  // text holds the operator, e.g. "==", "(", "|"
  kEof,
};

struct Token {
  TokenType type;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;  // 1-based line of the token's first character
};

// Tokenizes `source`. Comments are dropped; `{% raw %}...{% endraw %}` becomes text. Throws
// TemplateError naming the line for an unterminated tag, comment or string, or an unknown
// character inside a tag. The last token is kEof.
std::vector<Token> Tokenize(std::string_view source);

}  // namespace tessera::chat
