// Executes a parsed template (common/chat/ast.h) with Jinja2's scoping: a for-loop iteration,
// a macro call and a {% with %} each get a fresh scope whose assignments vanish when it ends
// (hence `namespace()`); `if` does not open a scope.
#pragma once

#include <ctime>
#include <string>

#include "common/chat/ast.h"
#include "common/chat/taint.h"
#include "common/chat/value.h"

namespace tessera::chat {

// Renders `program` with `variables` as the render context. `now` is what strftime_now()
// formats. The output's spans are the bytes that came from tainted variables (none when no
// variable is tainted). Throws TemplateError (with the failing line) or RaisedException, and
// OutputLimitError as soon as the output exceeds `max_output_bytes` (0: only the engine's own
// 64 MiB bound, a TemplateError).
TrackedText Execute(const StmtList& program, const ValueDict& variables, const std::tm& now,
                    size_t max_output_bytes = 0);

// Checks, as Jinja2 does when it compiles a template, that every filter and test named in
// `program` exists (outside `if` statements and conditional expressions, where Jinja2
// defers the check to the call: there an unknown one fails when reached).
void CheckNames(const StmtList& program);

}  // namespace tessera::chat
