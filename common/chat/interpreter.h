// Executes a parsed template (common/chat/ast.h) with Jinja2's scoping: a for-loop iteration,
// a macro call and a {% with %} each get a fresh scope whose assignments vanish when it ends
// (hence `namespace()`); `if` does not open a scope.
#pragma once

#include <ctime>
#include <string>

#include "common/chat/ast.h"
#include "common/chat/value.h"

namespace tessera::chat {

// Renders `program` with `variables` as the render context. `now` is what strftime_now()
// formats. Throws TemplateError (with the failing line) or RaisedException.
std::string Execute(const StmtList& program, const ValueDict& variables, const std::tm& now);

// Checks, as Jinja2 does when it compiles a template, that every filter and test named in
// `program` exists (outside `if` statements and conditional expressions, where Jinja2
// defers the check to the call: there an unknown one fails when reached).
void CheckNames(const StmtList& program);

}  // namespace tessera::chat
