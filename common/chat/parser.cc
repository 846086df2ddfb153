#include "common/chat/parser.h"

#include <initializer_list>

#include "common/chat/expression_parser.h"
#include "common/chat/lexer.h"
#include "common/chat/template_error.h"

namespace tessera::chat {

std::string DescribeToken(const Token& t) {
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

namespace {

// Statements: the template-level grammar ({% if %}, {% for %}, {% set %}, macros...).
class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  StmtList ParseAll() {
    StmtList body = ParseBody({});
    if (cur().type != TokenType::kEof) {
      throw TemplateError("unexpected '" + cur().text + "' tag", cur().line);
    }
    return body;
  }

 private:
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
        if (cur().type != TokenType::kVarEnd) Fail("expected '}}', found " + DescribeToken(cur()));
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
        Fail("unexpected " + DescribeToken(t));
      }
    }
  }

  std::unique_ptr<Stmt> ParseStatement() {
    NestingGuard guard(this);
    if (cur().type != TokenType::kName) Fail("expected a tag name, found " + DescribeToken(cur()));
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
};

}  // namespace

StmtList ParseTemplate(std::string_view source) { return Parser(Tokenize(source)).ParseAll(); }

}  // namespace tessera::chat
