// Parses Jinja2 expressions with Jinja2's grammar and operator precedence (or, and, not,
// comparisons, + -, ~, * / // %, **, unary, filters and tests, postfix access and calls).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/chat/ast.h"
#include "common/chat/token_stream.h"

namespace tessera::chat {

class ExpressionParser : public TokenStream {
 public:
  using TokenStream::TokenStream;

  ExprPtr ParseTuple(bool with_condexpr);
  ExprPtr ParseExpression(bool with_condexpr);
  ExprPtr ParseFilterChain(ExprPtr subject, bool leading_pipe = true);

 protected:
  // Expression trees deeper than this are refused (see TokenStream::kMaxNesting).
  static constexpr int kMaxExpressionHeight = 256;

  ExprPtr Make(Expr::Kind k, int line) { return std::make_unique<Expr>(k, line); }
  // Appends `child` (possibly null) to `parent`, keeping the tree's height bounded.
  void Adopt(Expr* parent, ExprPtr child);
  bool AtExpressionEnd() const;
  ExprPtr Binary(Expr::Kind k, int line, ExprPtr a, ExprPtr b, std::string op = "");
  ExprPtr ParseOr();
  ExprPtr ParseAnd();
  ExprPtr ParseNot();
  ExprPtr ParseCompare();
  ExprPtr ParseMath1();
  ExprPtr ParseConcat();
  ExprPtr ParseMath2();
  ExprPtr ParsePow();
  ExprPtr ParseUnary(bool with_filter);
  ExprPtr ParsePrimary();
  ExprPtr ParsePostfix(ExprPtr node);
  ExprPtr ParseSubscript(ExprPtr node, int line);
  std::vector<Arg> ParseArgs();
  ExprPtr ParseCall(ExprPtr callee);
  std::string ParseDottedName();
  ExprPtr ParseFilterExpr(ExprPtr node);
  ExprPtr ParseTest(ExprPtr node);
};

}  // namespace tessera::chat
