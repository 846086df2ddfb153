// Parses Jinja2 template tokens (common/chat/lexer.h) into statements, following Jinja2's own
// grammar and operator precedence.
#pragma once

#include <string_view>

#include "common/chat/ast.h"

namespace tessera::chat {

// Parses a whole template. Throws TemplateError naming the line for a syntax error or a tag
// the engine does not support (include, import, extends...), so that an unsupported
// construct never renders wrongly.
StmtList ParseTemplate(std::string_view source);

}  // namespace tessera::chat
