// A cursor over template tokens with the small helpers a recursive-descent parser needs,
// and the nesting bound shared by the expression and statement parsers.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/chat/lexer.h"
#include "common/chat/template_error.h"

namespace tessera::chat {

// How a token reads in an error message.
std::string DescribeToken(const Token& t);

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

 protected:
  // Recursive descents (parentheses, unary operators, nested tags) allowed before the
  // template is refused: Python's recursion limit stops Jinja2 at depths of this order,
  // and here the bound keeps hostile templates from exhausting the stack.
  static constexpr int kMaxNesting = 128;

  class NestingGuard {
   public:
    explicit NestingGuard(TokenStream* s) : s_(s) {
      if (++s_->nesting_ > kMaxNesting) {
        throw TemplateError("template nested too deeply", s->cur().line);
      }
    }
    ~NestingGuard() { --s_->nesting_; }

   private:
    TokenStream* s_;
  };

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
    if (!SkipOp(op)) Fail(std::string("expected '") + op + "', found " + DescribeToken(cur()));
  }
  std::string ExpectName() {
    if (cur().type != TokenType::kName) Fail("expected a name, found " + DescribeToken(cur()));
    std::string n = cur().text;
    Next();
    return n;
  }
  void ExpectBlockEnd() {
    if (cur().type != TokenType::kBlockEnd) Fail("expected '%}', found " + DescribeToken(cur()));
    Next();
  }

 private:
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int nesting_ = 0;
};

}  // namespace tessera::chat
