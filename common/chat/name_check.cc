#include "common/chat/interpreter.h"

#include "common/chat/filters.h"
#include "common/chat/template_error.h"
#include "common/chat/tests.h"

namespace tessera::chat {
namespace {

// Jinja2 fails at compile time on an unknown filter or test, except inside an `if` or a
// conditional expression ("soft" frames), where it fails only if the call is reached.
void CheckExpr(const Expr* e, bool soft) {
  if (e == nullptr) return;
  if (!soft && e->kind == Expr::Kind::kFilter && !IsKnownFilter(e->name)) {
    throw TemplateError("no filter named '" + e->name + "'", e->line);
  }
  if (!soft && e->kind == Expr::Kind::kTest && !IsKnownTest(e->name)) {
    throw TemplateError("no test named '" + e->name + "'", e->line);
  }
  soft = soft || e->kind == Expr::Kind::kCondition;
  for (const auto& o : e->operands) CheckExpr(o.get(), soft);
  for (const auto& a : e->args) CheckExpr(a.value.get(), soft);
}

void CheckStmts(const StmtList& program, bool soft) {
  for (const auto& s : program) {
    CheckExpr(s->expr.get(), soft);
    CheckExpr(s->filter.get(), soft);
    for (const auto& [cond, body] : s->branches) {
      CheckExpr(cond.get(), true);
      CheckStmts(body, true);
    }
    for (const auto& p : s->params) CheckExpr(p.default_value.get(), false);
    for (const auto& [name, expr] : s->assigns) CheckExpr(expr.get(), soft);
    // Loops, macros, call/filter/set blocks and `with` open inner frames, which are never soft.
    CheckStmts(s->body, false);
    CheckStmts(s->else_body, false);
  }
}

}  // namespace

void CheckNames(const StmtList& program) { CheckStmts(program, false); }

}  // namespace tessera::chat
