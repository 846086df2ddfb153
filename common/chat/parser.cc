#include "common/chat/parser.h"

#include <algorithm>
#include <initializer_list>

#include "common/chat/lexer.h"
#include "common/chat/template_error.h"

namespace tessera::chat {
namespace {

// Nesting limits. Python's own recursion limit stops Jinja2 at depths of this order; here
// they keep hostile templates from exhausting the stack while parsing, evaluating or
// destroying the tree.
constexpr int kMaxExpressionHeight = 256;
constexpr int kMaxNesting = 128;

std::string Describe(const Token& t) {
  switch (t.type) {
    case TokenType::kEof:
      return "end of template";
    case TokenType::kBlockEnd:
      return "'%}'";
    case TokenType::kVarEnd:
      return "'}}'";
    case TokenType::kString:
      return "string literal";
    case TokenType::kText:
      return "template text";
    default:
      return "'" + t.text + "'";
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  StmtList ParseAll() {
    StmtList body = ParseBody({});
    if (cur().type != TokenType::kEof) {
      throw TemplateError("unexpected '" + cur().text + "' tag", cur().line);
    }
    return body;
  }

 private:
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool IsOp(const char* op) const { return cur().type == TokenType::kOperator && cur().text == op; }
  bool IsName(const char* name) const {
    return cur().type == TokenType::kName && cur().text == name;
  }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  [[noreturn]] void Fail(const std::string& what) const { throw TemplateError(what, cur().line); }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Fail(std::string("expected '") + op + "', found " + Describe(cur()));
  }
  std::string ExpectName() {
    if (cur().type != TokenType::kName) Fail("expected a name, found " + Describe(cur()));
    std::string n = cur().text;
    Next();
    return n;
  }
  void ExpectBlockEnd() {
    if (cur().type != TokenType::kBlockEnd) Fail("expected '%}', found " + Describe(cur()));
    Next();
  }
  void ExpectEndTag(const char* name) {
    if (!SkipName(name)) Fail(std::string("expected '") + name + "'");
    ExpectBlockEnd();
  }

  // Statements until a block tag whose name is in `ends`; stops on that name (after `{%`).
  StmtList ParseBody(std::initializer_list<const char*> ends) {
    StmtList body;
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::kEof) {
        if (ends.size() != 0) {
          Fail(std::string("unexpected end of template: missing '{% ") + *ends.begin() + " %}'");
        }
        return body;
      }
      if (t.type == TokenType::kText) {
        auto s = std::make_unique<Stmt>(Stmt::Kind::kText, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        Next();
      } else if (t.type == TokenType::kVarBegin) {
        Next();
        auto s = std::make_unique<Stmt>(Stmt::Kind::kOutput, t.line);
        s->expr = ParseTuple(true);
        if (cur().type != TokenType::kVarEnd) Fail("expected '}}', found " + Describe(cur()));
        Next();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        Next();
        if (cur().type == TokenType::kName) {
          for (const char* e : ends) {
            if (cur().text == e) return body;
          }
        }
        body.push_back(ParseStatement());
      } else {
        Fail("unexpected " + Describe(t));
      }
    }
  }

  std::unique_ptr<Stmt> ParseStatement() {
    NestingGuard guard(this);
    if (cur().type != TokenType::kName) Fail("expected a tag name, found " + Describe(cur()));
    std::string tag = cur().text;
    int line = cur().line;
    Next();
    if (tag == "if") return ParseIf(line);
    if (tag == "for") return ParseFor(line);
    if (tag == "set") return ParseSet(line);
    if (tag == "macro") return ParseMacro(line);
    if (tag == "call") return ParseCallBlock(line);
    if (tag == "filter") return ParseFilterBlock(line);
    if (tag == "with") return ParseWith(line);
    if (tag == "generation" || tag == "block") {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kScope, line);
      if (tag == "block") s->name = ExpectName();
      ExpectBlockEnd();
      const char* end = tag == "generation" ? "endgeneration" : "endblock";
      s->body = ParseBody({end});
      Next();
      if (tag == "block" && cur().type == TokenType::kName) Next();  // {% endblock name %}
      ExpectBlockEnd();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      ExpectBlockEnd();
      return std::make_unique<Stmt>(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue,
                                    line);
    }
    if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" || tag == "do" ||
        tag == "autoescape" || tag == "trans") {
      throw TemplateError("unsupported tag '" + tag + "'", line);
    }
    throw TemplateError("unknown tag '" + tag + "'", line);
  }

  std::unique_ptr<Stmt> ParseIf(int line) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kIf, line);
    ExprPtr cond = ParseTuple(true);
    ExpectBlockEnd();
    while (true) {
      StmtList body = ParseBody({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      std::string t = cur().text;
      Next();
      if (t == "elif") {
        cond = ParseTuple(true);
        ExpectBlockEnd();
      } else if (t == "else") {
        ExpectBlockEnd();
        s->branches.emplace_back(nullptr, ParseBody({"endif"}));
        Next();
        ExpectBlockEnd();
        return s;
      } else {
        ExpectBlockEnd();
        return s;
      }
    }
  }

  std::vector<std::string> ParseTargets() {
    bool paren = SkipOp("(");
    std::vector<std::string> names{ExpectName()};
    while (SkipOp(",")) {
      if (cur().type != TokenType::kName || IsName("in")) break;
      names.push_back(ExpectName());
    }
    if (paren) ExpectOp(")");
    return names;
  }

  std::unique_ptr<Stmt> ParseFor(int line) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kFor, line);
    s->targets = ParseTargets();
    if (!SkipName("in")) Fail("expected 'in' in for loop");
    // The iterable is parsed without a conditional expression: a trailing `if` filters.
    s->expr = ParseTuple(false);
    if (SkipName("if")) s->filter = ParseExpression(true);
    if (SkipName("recursive")) throw TemplateError("unsupported: recursive for loops", line);
    ExpectBlockEnd();
    s->body = ParseBody({"endfor", "else"});
    if (cur().text == "else") {
      Next();
      ExpectBlockEnd();
      s->else_body = ParseBody({"endfor"});
    }
    Next();
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> ParseSet(int line) {
    std::string first = ExpectName();
    if (SkipOp(".")) {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kSet, line);
      s->name = first;
      s->attr = ExpectName();
      ExpectOp("=");
      s->expr = ParseTuple(true);
      ExpectBlockEnd();
      return s;
    }
    std::vector<std::string> targets{first};
    while (SkipOp(",")) targets.push_back(ExpectName());
    if (SkipOp("=")) {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kSet, line);
      s->targets = std::move(targets);
      s->expr = ParseTuple(true);
      ExpectBlockEnd();
      return s;
    }
    if (targets.size() != 1) Fail("a block set assigns exactly one name");
    auto s = std::make_unique<Stmt>(Stmt::Kind::kSetBlock, line);
    s->targets = std::move(targets);
    if (IsOp("|")) s->filter = ParseFilterChain(nullptr);
    ExpectBlockEnd();
    s->body = ParseBody({"endset"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  std::vector<MacroParam> ParseParams() {
    std::vector<MacroParam> params;
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!params.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      MacroParam p;
      p.name = ExpectName();
      if (SkipOp("=")) p.default_value = ParseExpression(true);
      params.push_back(std::move(p));
    }
    Next();
    return params;
  }

  std::unique_ptr<Stmt> ParseMacro(int line) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kMacro, line);
    s->name = ExpectName();
    s->params = ParseParams();
    ExpectBlockEnd();
    s->body = ParseBody({"endmacro"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> ParseCallBlock(int line) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kCallBlock, line);
    if (IsOp("(")) s->params = ParseParams();
    s->expr = ParseExpression(true);
    if (s->expr->kind != Expr::Kind::kCall) Fail("expected a macro call in {% call %}");
    ExpectBlockEnd();
    s->body = ParseBody({"endcall"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> ParseFilterBlock(int line) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kFilterBlock, line);
    s->filter = ParseFilterChain(nullptr, /*leading_pipe=*/false);
    ExpectBlockEnd();
    s->body = ParseBody({"endfilter"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> ParseWith(int line) {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kWith, line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!s->assigns.empty()) ExpectOp(",");
      std::string name = ExpectName();
      ExpectOp("=");
      s->assigns.emplace_back(name, ParseExpression(true));
    }
    ExpectBlockEnd();
    s->body = ParseBody({"endwith"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  // ---- expressions ----

  ExprPtr Make(Expr::Kind k, int line) { return std::make_unique<Expr>(k, line); }

  // Appends `child` (possibly null) to `parent`, keeping the tree's height bounded.
  void Adopt(Expr* parent, ExprPtr child) {
    if (child) {
      parent->height = std::max(parent->height, child->height + 1);
      if (parent->height > kMaxExpressionHeight) {
        throw TemplateError("expression nested too deeply", parent->line);
      }
    }
    parent->operands.push_back(std::move(child));
  }

  // Counts recursive descents (parentheses, unary operators, nested tags).
  class NestingGuard {
   public:
    NestingGuard(Parser* p) : p_(p) {
      if (++p_->nesting_ > kMaxNesting)
        throw TemplateError("template nested too deeply", p->cur().line);
    }
    ~NestingGuard() { --p_->nesting_; }

   private:
    Parser* p_;
  };

  ExprPtr ParseTuple(bool with_condexpr) {
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

  bool AtExpressionEnd() const {
    return cur().type == TokenType::kBlockEnd || cur().type == TokenType::kVarEnd ||
           cur().type == TokenType::kEof || IsOp(")") || IsName("if") || IsName("in");
  }

  ExprPtr ParseExpression(bool with_condexpr) {
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

  ExprPtr Binary(Expr::Kind k, int line, ExprPtr a, ExprPtr b, std::string op = "") {
    auto e = Make(k, line);
    e->name = std::move(op);
    Adopt(e.get(), std::move(a));
    Adopt(e.get(), std::move(b));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      int line = cur().line;
      Next();
      left = Binary(Expr::Kind::kOr, line, std::move(left), ParseAnd());
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      int line = cur().line;
      Next();
      left = Binary(Expr::Kind::kAnd, line, std::move(left), ParseNot());
    }
    return left;
  }

  ExprPtr ParseNot() {
    NestingGuard guard(this);
    if (IsName("not")) {
      auto e = Make(Expr::Kind::kNot, cur().line);
      Next();
      Adopt(e.get(), ParseNot());
      return e;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
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

  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      std::string op = cur().text;
      int line = cur().line;
      Next();
      left = Binary(Expr::Kind::kBinary, line, std::move(left), ParseConcat(), op);
    }
    return left;
  }

  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (IsOp("~")) {
      int line = cur().line;
      Next();
      left = Binary(Expr::Kind::kBinary, line, std::move(left), ParseMath2(), "~");
    }
    return left;
  }

  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = cur().text;
      int line = cur().line;
      Next();
      left = Binary(Expr::Kind::kBinary, line, std::move(left), ParsePow(), op);
    }
    return left;
  }

  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (IsOp("**")) {
      int line = cur().line;
      Next();
      left = Binary(Expr::Kind::kBinary, line, std::move(left), ParseUnary(true), "**");
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
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

  ExprPtr ParsePrimary() {
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
    Fail("unexpected " + Describe(t));
  }

  ExprPtr ParsePostfix(ExprPtr node) {
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

  ExprPtr ParseSubscript(ExprPtr node, int line) {
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

  std::vector<Arg> ParseArgs() {
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

  ExprPtr ParseCall(ExprPtr callee) {
    auto e = Make(Expr::Kind::kCall, cur().line);
    Adopt(e.get(), std::move(callee));
    e->args = ParseArgs();
    return e;
  }

  std::string ParseDottedName() {
    std::string n = ExpectName();
    while (SkipOp(".")) n += "." + ExpectName();
    return n;
  }

  // `| name(args) | name ...` applied to `subject` (null inside {% filter %} / block set).
  ExprPtr ParseFilterChain(ExprPtr subject, bool leading_pipe = true) {
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

  ExprPtr ParseFilterExpr(ExprPtr node) {
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

  ExprPtr ParseTest(ExprPtr node) {
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
};

}  // namespace

StmtList ParseTemplate(std::string_view source) { return Parser(Tokenize(source)).ParseAll(); }

}  // namespace tessera::chat
