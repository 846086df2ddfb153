#include "common/chat/expression_parser.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/chat/template_error.h"

namespace tessera::chat {

void ExpressionParser::Adopt(Expr* parent, ExprPtr child) {
  if (child) {
    parent->height = std::max(parent->height, child->height + 1);
    if (parent->height > kMaxExpressionHeight) {
      throw TemplateError("expression nested too deeply", parent->line);
    }
  }
  parent->operands.push_back(std::move(child));
}

ExprPtr ExpressionParser::ParseTuple(bool with_condexpr) {
  int line = cur().line;
  ExprPtr first = ParseExpression(with_condexpr);
  if (!IsOp(",")) return first;
  auto t = Make(Expr::Kind::kTuple, line);
  Adopt(t.get(), std::move(first));
  while (SkipOp(",")) {
    if (AtExpressionEnd()) break;
    Adopt(t.get(), ParseExpression(with_condexpr));
  }
  return t;
}

bool ExpressionParser::AtExpressionEnd() const {
  return cur().type == TokenType::kBlockEnd || cur().type == TokenType::kVarEnd ||
         cur().type == TokenType::kEof || IsOp(")") || IsName("if") || IsName("in");
}

ExprPtr ExpressionParser::ParseExpression(bool with_condexpr) {
  if (!with_condexpr) return ParseOr();
  int line = cur().line;
  ExprPtr expr = ParseOr();
  while (SkipName("if")) {
    auto c = Make(Expr::Kind::kCondition, line);
    ExprPtr cond = ParseOr();
    ExprPtr other = SkipName("else") ? ParseExpression(true) : nullptr;
    Adopt(c.get(), std::move(cond));
    Adopt(c.get(), std::move(expr));
    Adopt(c.get(), std::move(other));
    expr = std::move(c);
  }
  return expr;
}

ExprPtr ExpressionParser::Binary(Expr::Kind k, int line, ExprPtr a, ExprPtr b, std::string op) {
  auto e = Make(k, line);
  e->name = std::move(op);
  Adopt(e.get(), std::move(a));
  Adopt(e.get(), std::move(b));
  return e;
}

ExprPtr ExpressionParser::ParseOr() {
  ExprPtr left = ParseAnd();
  while (IsName("or")) {
    int line = cur().line;
    Next();
    left = Binary(Expr::Kind::kOr, line, std::move(left), ParseAnd());
  }
  return left;
}

ExprPtr ExpressionParser::ParseAnd() {
  ExprPtr left = ParseNot();
  while (IsName("and")) {
    int line = cur().line;
    Next();
    left = Binary(Expr::Kind::kAnd, line, std::move(left), ParseNot());
  }
  return left;
}

ExprPtr ExpressionParser::ParseNot() {
  NestingGuard guard(this);
  if (IsName("not")) {
    auto e = Make(Expr::Kind::kNot, cur().line);
    Next();
    Adopt(e.get(), ParseNot());
    return e;
  }
  return ParseCompare();
}

ExprPtr ExpressionParser::ParseCompare() {
  int line = cur().line;
  ExprPtr first = ParseMath1();
  ExprPtr cmp;
  while (true) {
    std::string op;
    if (cur().type == TokenType::kOperator &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
         cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      Next();
    } else if (IsName("in")) {
      op = "in";
      Next();
    } else if (IsName("not") && peek().type == TokenType::kName && peek().text == "in") {
      op = "not in";
      Next();
      Next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = Make(Expr::Kind::kCompare, line);
      Adopt(cmp.get(), std::move(first));
    }
    cmp->ops.push_back(op);
    Adopt(cmp.get(), ParseMath1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr ExpressionParser::ParseMath1() {
  ExprPtr left = ParseConcat();
  while (IsOp("+") || IsOp("-")) {
    std::string op = cur().text;
    int line = cur().line;
    Next();
    left = Binary(Expr::Kind::kBinary, line, std::move(left), ParseConcat(), op);
  }
  return left;
}

ExprPtr ExpressionParser::ParseConcat() {
  ExprPtr left = ParseMath2();
  while (IsOp("~")) {
    int line = cur().line;
    Next();
    left = Binary(Expr::Kind::kBinary, line, std::move(left), ParseMath2(), "~");
  }
  return left;
}

ExprPtr ExpressionParser::ParseMath2() {
  ExprPtr left = ParsePow();
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    std::string op = cur().text;
    int line = cur().line;
    Next();
    left = Binary(Expr::Kind::kBinary, line, std::move(left), ParsePow(), op);
  }
  return left;
}

ExprPtr ExpressionParser::ParsePow() {
  ExprPtr left = ParseUnary(true);
  while (IsOp("**")) {
    int line = cur().line;
    Next();
    left = Binary(Expr::Kind::kBinary, line, std::move(left), ParseUnary(true), "**");
  }
  return left;
}

ExprPtr ExpressionParser::ParseUnary(bool with_filter) {
  NestingGuard guard(this);
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = Make(Expr::Kind::kUnary, cur().line);
    node->name = cur().text;
    Next();
    Adopt(node.get(), ParseUnary(false));
  } else {
    node = ParsePrimary();
  }
  node = ParsePostfix(std::move(node));
  if (with_filter) node = ParseFilterExpr(std::move(node));
  return node;
}

ExprPtr ExpressionParser::ParsePrimary() {
  const Token& t = cur();
  int line = t.line;
  if (t.type == TokenType::kName) {
    std::string n = t.text;
    Next();
    auto e = Make(Expr::Kind::kLiteral, line);
    if (n == "true" || n == "True") {
      e->literal = Value(true);
    } else if (n == "false" || n == "False") {
      e->literal = Value(false);
    } else if (n == "none" || n == "None") {
      e->literal = Value::None();
    } else {
      e->kind = Expr::Kind::kName;
      e->name = n;
    }
    return e;
  }
  if (t.type == TokenType::kString) {
    std::string s;
    while (cur().type == TokenType::kString) {  // adjacent literals concatenate
      s += cur().text;
      Next();
    }
    auto e = Make(Expr::Kind::kLiteral, line);
    e->literal = Value(std::move(s));
    return e;
  }
  if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
    auto e = Make(Expr::Kind::kLiteral, line);
    e->literal = t.type == TokenType::kInt ? Value(t.int_value) : Value(t.float_value);
    Next();
    return e;
  }
  if (SkipOp("(")) {
    if (SkipOp(")")) return Make(Expr::Kind::kTuple, line);
    ExprPtr inner = ParseExpression(true);
    if (IsOp(",")) {
      auto tup = Make(Expr::Kind::kTuple, line);
      Adopt(tup.get(), std::move(inner));
      while (SkipOp(",")) {
        if (IsOp(")")) break;
        Adopt(tup.get(), ParseExpression(true));
      }
      inner = std::move(tup);
    }
    ExpectOp(")");
    return inner;
  }
  if (SkipOp("[")) {
    auto e = Make(Expr::Kind::kList, line);
    while (!IsOp("]")) {
      if (!e->operands.empty()) ExpectOp(",");
      if (IsOp("]")) break;
      Adopt(e.get(), ParseExpression(true));
    }
    Next();
    return e;
  }
  if (SkipOp("{")) {
    auto e = Make(Expr::Kind::kDict, line);
    while (!IsOp("}")) {
      if (!e->operands.empty()) ExpectOp(",");
      if (IsOp("}")) break;
      Adopt(e.get(), ParseExpression(true));
      ExpectOp(":");
      Adopt(e.get(), ParseExpression(true));
    }
    Next();
    return e;
  }
  Fail("unexpected " + DescribeToken(t));
}

ExprPtr ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    int line = cur().line;
    if (SkipOp(".")) {
      if (cur().type == TokenType::kName) {
        auto e = Make(Expr::Kind::kGetAttr, line);
        e->name = cur().text;
        Next();
        Adopt(e.get(), std::move(node));
        node = std::move(e);
      } else if (cur().type == TokenType::kInt) {
        auto e = Make(Expr::Kind::kGetItem, line);
        auto idx = Make(Expr::Kind::kLiteral, line);
        idx->literal = Value(cur().int_value);
        Next();
        Adopt(e.get(), std::move(node));
        Adopt(e.get(), std::move(idx));
        node = std::move(e);
      } else {
        Fail("expected an attribute name after '.'");
      }
    } else if (SkipOp("[")) {
      node = ParseSubscript(std::move(node), line);
    } else if (IsOp("(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::ParseSubscript(ExprPtr node, int line) {
  ExprPtr parts[3];
  bool is_slice = false;
  int idx = 0;
  while (!IsOp("]")) {
    if (SkipOp(":")) {
      is_slice = true;
      if (++idx > 2) Fail("too many ':' in slice");
      continue;
    }
    if (parts[idx]) Fail("expected ':' or ']' in subscript");
    parts[idx] = ParseExpression(true);
    if (IsOp(",")) Fail("unsupported: tuple subscripts");
  }
  Next();
  if (!is_slice) {
    if (!parts[0]) Fail("empty subscript");
    auto e = Make(Expr::Kind::kGetItem, line);
    Adopt(e.get(), std::move(node));
    Adopt(e.get(), std::move(parts[0]));
    return e;
  }
  auto e = Make(Expr::Kind::kSlice, line);
  Adopt(e.get(), std::move(node));
  for (auto& p : parts) Adopt(e.get(), std::move(p));
  return e;
}

std::vector<Arg> ExpressionParser::ParseArgs() {
  std::vector<Arg> args;
  ExpectOp("(");
  while (!IsOp(")")) {
    if (!args.empty()) ExpectOp(",");
    if (IsOp(")")) break;
    if (IsOp("*") || IsOp("**")) Fail("unsupported: *args / **kwargs in calls");
    Arg a;
    if (cur().type == TokenType::kName && peek().type == TokenType::kOperator &&
        peek().text == "=") {
      a.name = cur().text;
      Next();
      Next();
    }
    a.value = ParseExpression(true);
    args.push_back(std::move(a));
  }
  Next();
  return args;
}

ExprPtr ExpressionParser::ParseCall(ExprPtr callee) {
  auto e = Make(Expr::Kind::kCall, cur().line);
  Adopt(e.get(), std::move(callee));
  e->args = ParseArgs();
  return e;
}

std::string ExpressionParser::ParseDottedName() {
  std::string n = ExpectName();
  while (SkipOp(".")) absl::StrAppend(&n, ".", ExpectName());
  return n;
}

// `| name(args) | name ...` applied to `subject` (null inside {% filter %} / block set).
ExprPtr ExpressionParser::ParseFilterChain(ExprPtr subject, bool leading_pipe) {
  bool first = true;
  while ((first && !leading_pipe) || SkipOp("|")) {
    first = false;
    auto f = Make(Expr::Kind::kFilter, cur().line);
    f->name = ParseDottedName();
    if (IsOp("(")) f->args = ParseArgs();
    Adopt(f.get(), std::move(subject));
    subject = std::move(f);
  }
  return subject;
}

ExprPtr ExpressionParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      node = ParseFilterChain(std::move(node));
    } else if (IsName("is")) {
      node = ParseTest(std::move(node));
    } else if (IsOp("(")) {
      node = ParseCall(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::ParseTest(ExprPtr node) {
  auto t = Make(Expr::Kind::kTest, cur().line);
  Next();  // is
  t->negated = SkipName("not");
  t->name = ParseDottedName();
  if (IsOp("(")) {
    t->args = ParseArgs();
  } else if ((cur().type == TokenType::kName || cur().type == TokenType::kString ||
              cur().type == TokenType::kInt || cur().type == TokenType::kFloat || IsOp("(") ||
              IsOp("[") || IsOp("{")) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) Fail("you cannot chain multiple tests with 'is'");
    Arg a;
    a.value = ParsePostfix(ParsePrimary());
    t->args.push_back(std::move(a));
  }
  Adopt(t.get(), std::move(node));
  return t;
}

std::vector<Token> toks_;
size_t pos_ = 0;
int nesting_ = 0;

}  // namespace tessera::chat
