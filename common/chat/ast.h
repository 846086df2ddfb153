// The parsed form of a Jinja2 template: expressions and statements, each remembering the
// template line it came from so that evaluation errors can name it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/chat/value.h"

namespace tessera::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// A call argument; `name` is empty for a positional one.
struct Arg {
  std::string name;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // operands
    kTuple,      // operands (a tuple is a list at run time)
    kDict,       // operands: key, value, key, value...
    kGetAttr,    // operands[0].name
    kGetItem,    // operands[0][operands[1]]
    kSlice,      // operands[0][start:stop:step]; absent parts are null
    kCall,       // operands[0](args)
    kFilter,     // operands[0] | name(args); operands[0] is null inside {% filter %}
    kTest,       // operands[0] is [not] name(args)
    kUnary,      // name ("-", "+") operands[0]
    kBinary,     // operands[0] name operands[1]; name is one of + - * / // % ** ~
    kCompare,    // operands[0] ops[0] operands[1] ops[1] ... (Python chained comparison)
    kAnd,        // operands[0] and operands[1]
    kOr,         // operands[0] or operands[1]
    kNot,        // not operands[0]
    kCondition,  // operands[1] if operands[0] else operands[2] (null: undefined)
  };

  Expr(Kind k, int l) : kind(k), line(l) {}

  Kind kind;
  int line;
  Value literal;
  std::string name;
  std::vector<ExprPtr> operands;
  std::vector<Arg> args;
  std::vector<std::string> ops;
  bool negated = false;  // kTest: `is not`
  int height = 1;        // levels of sub-expressions below and including this one
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (a null condition is the else branch)
    kFor,          // for targets in expr [if filter] body [else else_body]
    kSet,          // set targets = expr | set name.attr = expr (attr non-empty)
    kSetBlock,     // set targets[0] [| filter] body endset
    kMacro,        // macro name(params) body
    kCallBlock,    // call(params) expr body: expr is the call, body becomes `caller`
    kFilterBlock,  // filter expr body: expr is a filter chain on a null subject
    kWith,         // with assigns body
    kScope,        // a body rendered as is ({% generation %}, {% block %})
    kBreak,
    kContinue,
  };

  Stmt(Kind k, int l) : kind(k), line(l) {}

  Kind kind;
  int line;
  std::string text;
  std::string name;
  std::string attr;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::vector<std::pair<ExprPtr, StmtList>> branches;
  StmtList body;
  StmtList else_body;
  std::vector<MacroParam> params;
  std::vector<std::pair<std::string, ExprPtr>> assigns;
};

}  // namespace tessera::chat
