#include "common/chat/interpreter.h"

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "common/chat/call_args.h"
#include "common/chat/filters.h"
#include "common/chat/methods.h"
#include "common/chat/operators.h"
#include "common/chat/py_format.h"
#include "common/chat/py_string.h"
#include "common/chat/taint.h"
#include "common/chat/template_error.h"
#include "common/chat/tests.h"

namespace tessera::chat {
namespace {

// Python's recursion limit bounds Jinja2's macro recursion at about this depth; past it we
// fail rather than overflow the C++ stack.
constexpr int kMaxCallDepth = 200;
// Jinja2's sandbox refuses range() above MAX_RANGE = 100000.
constexpr int64_t kMaxRange = 100000;
// Bounds on one render, so a hostile template cannot hold a server thread or its memory:
// statements executed and bytes of output.
constexpr int64_t kMaxSteps = 20'000'000;
constexpr size_t kMaxOutputBytes = size_t{64} << 20;
// A tracked render's request spans take up to 8 bytes per output byte (16 per span, at
// least two bytes per span); this keeps them within the same memory as the output bound.
constexpr size_t kMaxOutputSpans = kMaxOutputBytes / 16;

// A scope's variables. Scopes hold a handful of names, so a flat vector beats a hash map.
class FrameVars {
 public:
  Value& operator[](const std::string& name) {
    for (auto& [k, v] : entries_) {
      if (k == name) return v;
    }
    entries_.emplace_back(name, Value());
    return entries_.back().second;
  }
  const Value* Find(const std::string& name) const {
    for (const auto& [k, v] : entries_) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  size_t count(const std::string& name) const { return Find(name) ? 1 : 0; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
};

struct Frame {
  explicit Frame(const Frame* p = nullptr) : parent(p) {}

  FrameVars vars;
  const Frame* parent = nullptr;
  // Created when a closure (a macro or `caller`) captures this frame; closures hold a
  // weak_ptr to it and fall back to the template's top scope once the frame is gone.
  std::shared_ptr<char> lifetime;

  const Value* Lookup(const std::string& name) const {
    for (const Frame* f = this; f != nullptr; f = f->parent) {
      if (const Value* v = f->vars.Find(name)) return v;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

[[noreturn]] void TypeErr(const std::string& what) { throw TemplateError("TypeError: " + what); }

class Interpreter {
 public:
  Interpreter(const ValueDict& variables, const std::tm& now, size_t max_output_bytes)
      : now_(now), max_output_bytes_(max_output_bytes) {
    InstallGlobals();
    root_.parent = &globals_;
    for (const auto& [k, v] : variables.entries()) root_.vars[k] = v;
  }

  TrackedText Run(const StmtList& program) {
    TrackedText out;
    ExecList(program, root_, &out);
    return out;
  }

 private:
  void InstallGlobals() {
    globals_.vars["range"] = Value::Function("range", [](CallArgs& args) {
      if (!args.keyword.empty()) TypeErr("range() takes no keyword arguments");
      std::vector<int64_t> a;
      for (const Value& v : args.positional) {
        if (!v.is_int() && !v.is_bool()) TypeErr("range() needs integers, got " + TypeName(v));
        a.push_back(v.as_int());
      }
      if (a.empty() || a.size() > 3) TypeErr("range expected 1 to 3 arguments");
      int64_t start = a.size() == 1 ? 0 : a[0], stop = a.size() == 1 ? a[0] : a[1];
      int64_t step = a.size() == 3 ? a[2] : 1;
      if (step == 0) throw TemplateError("ValueError: range() arg 3 must not be zero");
      ValueList out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
        if (static_cast<int64_t>(out.size()) >= kMaxRange) {
          throw TemplateError(
              "OverflowError: Range too big. The sandbox blocks ranges larger than "
              "MAX_RANGE (100000).");
        }
        out.emplace_back(i);
        if (__builtin_add_overflow(i, step, &i)) break;  // the next value is past `stop`
      }
      return Value::List(std::move(out));
    });
    globals_.vars["namespace"] = Value::Function("namespace", [](CallArgs& args) {
      ValueDict attrs;
      for (const Value& v : args.positional) {
        if (!v.is_dict()) TypeErr("namespace() positional arguments must be mappings");
        for (const auto& [k, x] : v.dict().entries()) attrs.Set(k, x);
        if (v.dict().keys_tainted()) attrs.set_keys_tainted(true);
      }
      for (const auto& [k, v] : args.keyword) attrs.Set(k, v);
      return Value::Namespace(std::move(attrs));
    });
    globals_.vars["dict"] = Value::Function("dict", [](CallArgs& args) {
      ValueDict d;
      for (const Value& v : args.positional) {
        if (!v.is_dict()) TypeErr("dict() positional argument must be a mapping");
        for (const auto& [k, x] : v.dict().entries()) d.Set(k, x);
        if (v.dict().keys_tainted()) d.set_keys_tainted(true);
      }
      for (const auto& [k, v] : args.keyword) d.Set(k, v);
      return Value::Dict(std::move(d));
    });
    // joiner(sep): a callable that returns "" the first time and `sep` afterwards.
    globals_.vars["joiner"] = Value::Function("joiner", [](CallArgs& args) {
      BoundArgs a("joiner", args, {"sep"});
      Value sep = a.Has(0) ? StrValue(a.Get(0)) : Value(", ");
      auto used = std::make_shared<bool>(false);
      return Value::Function("joiner", [sep, used](CallArgs&) {
        if (!*used) {
          *used = true;
          return Value("");
        }
        return sep;
      });
    });
    globals_.vars["raise_exception"] = Value::Function("raise_exception", [](CallArgs& args) {
      BoundArgs a("raise_exception", args, {"message"});
      throw RaisedException(ToStr(a.Get(0)));
      return Value();
    });
    globals_.vars["strftime_now"] = Value::Function("strftime_now", [this](CallArgs& args) {
      BoundArgs a("strftime_now", args, {"format"});
      return WholeIf(Strftime(ToStr(a.Get(0)), now_), ContainsTaint(a.Get(0)));
    });
  }

  // ---- statements ----

  Flow ExecList(const StmtList& list, Frame& frame, TrackedText* out) {
    for (const auto& s : list) {
      Step(s->line);
      Flow f = Exec(*s, frame, out);
      if (max_output_bytes_ > 0 && out->size() > max_output_bytes_) {
        throw OutputLimitError("the rendered prompt exceeds " + std::to_string(max_output_bytes_) +
                               " bytes");
      }
      if (out->size() > kMaxOutputBytes) {
        throw TemplateError(
            "template output exceeded " + std::to_string(kMaxOutputBytes) + " bytes", s->line);
      }
      if (out->spans().size() > kMaxOutputSpans) {
        throw TemplateError("template output exceeded " + std::to_string(kMaxOutputSpans) +
                                " separate pieces of request data",
                            s->line);
      }
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow Exec(const Stmt& s, Frame& frame, TrackedText* out) {
    try {
      return ExecUnchecked(s, frame, out);
    } catch (TemplateError& e) {
      if (e.line() == 0) e.set_line(s.line);
      throw;
    }
  }

  Flow ExecUnchecked(const Stmt& s, Frame& frame, TrackedText* out) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        out->Append(s.text);
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        out->AppendStr(Eval(*s.expr, frame));
        return Flow::kNormal;
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (cond == nullptr || Truthy(Eval(*cond, frame))) return ExecList(body, frame, out);
        }
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        ExecFor(s, frame, out);
        return Flow::kNormal;
      case Stmt::Kind::kSet:
        ExecSet(s, frame);
        return Flow::kNormal;
      case Stmt::Kind::kSetBlock: {
        TrackedText body;
        Frame inner(&frame);
        ExecList(s.body, inner, &body);
        Value v = body.TakeValue();
        if (s.filter) v = ApplyFilterChain(*s.filter, v, frame);
        frame.vars[s.targets[0]] = std::move(v);
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        frame.vars[s.name] = MakeMacro(s, frame);
        return Flow::kNormal;
      case Stmt::Kind::kCallBlock: {
        Closure scope = Capture(frame);
        Value caller = Value::Function("caller", [this, &s, scope](CallArgs& args) {
          Frame cf(Resolve(scope));
          BindParams(s, args, cf);
          TrackedText body;
          ExecList(s.body, cf, &body);
          return body.TakeValue();
        });
        out->AppendStr(EvalCall(*s.expr, frame, &caller));
        return Flow::kNormal;
      }
      case Stmt::Kind::kFilterBlock: {
        TrackedText body;
        Frame inner(&frame);
        ExecList(s.body, inner, &body);
        out->AppendStr(ApplyFilterChain(*s.filter, body.TakeValue(), frame));
        return Flow::kNormal;
      }
      case Stmt::Kind::kWith: {
        Frame inner(&frame);
        for (const auto& [name, expr] : s.assigns) inner.vars[name] = Eval(*expr, frame);
        return ExecList(s.body, inner, out);
      }
      case Stmt::Kind::kScope: {
        Frame inner(&frame);
        return ExecList(s.body, inner, out);
      }
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void Step(int line) {
    if (++steps_ > kMaxSteps) {
      throw TemplateError("template exceeded " + std::to_string(kMaxSteps) + " steps", line);
    }
  }

  void Assign(const std::vector<std::string>& targets, const Value& v, Frame& frame) {
    if (targets.size() == 1) {
      frame.vars[targets[0]] = v;
      return;
    }
    ValueList items = Iterate(v);
    if (items.size() != targets.size()) {
      throw TemplateError("ValueError: cannot unpack " + std::to_string(items.size()) +
                          " values into " + std::to_string(targets.size()) + " names");
    }
    for (size_t i = 0; i < targets.size(); ++i) frame.vars[targets[i]] = items[i];
  }

  void ExecSet(const Stmt& s, Frame& frame) {
    Value v = Eval(*s.expr, frame);
    if (s.attr.empty()) {
      Assign(s.targets, v, frame);
      return;
    }
    const Value* ns = frame.Lookup(s.name);
    if (ns == nullptr || !ns->is_namespace()) {
      throw TemplateError("cannot assign attribute on non-namespace object '" + s.name + "'");
    }
    ns->namespace_attrs().Set(s.attr, std::move(v));
  }

  void ExecFor(const Stmt& s, Frame& frame, TrackedText* out) {
    Value iterable = Eval(*s.expr, frame);
    ValueList items = Iterate(iterable);
    if (s.filter) {
      ValueList kept;
      for (Value& item : items) {
        Step(s.line);
        Frame f(&frame);
        Assign(s.targets, item, f);
        if (Truthy(Eval(*s.filter, f))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      Step(s.line);
      Frame f(&frame);
      Assign(s.targets, items[i], f);
      f.vars["loop"] = LoopObject(items, i);
      Flow flow = ExecList(s.body, f, out);
      if (flow == Flow::kBreak) break;
    }
    if (n == 0 && !s.else_body.empty()) {
      Frame f(&frame);
      ExecList(s.else_body, f, out);
    }
  }

  static Value LoopObject(const ValueList& items, int64_t i) {
    const int64_t n = static_cast<int64_t>(items.size());
    ValueDict loop;
    loop.Reserve(12);
    loop.Append("index", Value(i + 1));
    loop.Append("index0", Value(i));
    loop.Append("revindex", Value(n - i));
    loop.Append("revindex0", Value(n - i - 1));
    loop.Append("first", Value(i == 0));
    loop.Append("last", Value(i == n - 1));
    loop.Append("length", Value(n));
    loop.Append("depth", Value(int64_t{1}));
    loop.Append("depth0", Value(int64_t{0}));
    loop.Append("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    loop.Append("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    loop.Append("cycle", Value::Function("cycle", [i](CallArgs& args) {
                  if (args.positional.empty()) TypeErr("no items for cycling given");
                  return args.positional[i % args.positional.size()];
                }));
    return Value::Dict(std::move(loop));
  }

  // Binds a macro's (or caller's) parameters in `frame`.
  void BindParams(const Stmt& s, CallArgs& args, Frame& frame) {
    ValueList varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < s.params.size()) {
        frame.vars[s.params[i].name] = args.positional[i];
      } else {
        varargs.push_back(args.positional[i]);
      }
    }
    ValueDict kwargs;
    for (auto& [k, v] : args.keyword) {
      bool is_param = false;
      for (const MacroParam& p : s.params) is_param = is_param || p.name == k;
      if (is_param) {
        frame.vars[k] = v;
      } else if (k == "caller") {
        frame.vars["caller"] = v;
      } else {
        kwargs.Set(k, v);
      }
    }
    for (const MacroParam& p : s.params) {
      if (frame.vars.count(p.name)) continue;
      frame.vars[p.name] = p.default_value
                               ? Eval(*p.default_value, frame)
                               : Value::Undefined("parameter '" + p.name + "' was not provided");
    }
    frame.vars["varargs"] = Value::Tuple(std::move(varargs));
    frame.vars["kwargs"] = Value::Dict(std::move(kwargs));
  }

  // The scope a closure sees: its defining frame, late-bound as Jinja2's closures are.
  struct Closure {
    const Frame* frame = nullptr;
    std::weak_ptr<char> alive;
  };

  Closure Capture(Frame& frame) {
    if (&frame == &root_) return {};
    if (!frame.lifetime) frame.lifetime = std::make_shared<char>(0);
    return {&frame, frame.lifetime};
  }

  const Frame* Resolve(const Closure& c) const {
    return c.frame != nullptr && !c.alive.expired() ? c.frame : &root_;
  }

  Value MakeMacro(const Stmt& s, Frame& defining) {
    Closure scope = Capture(defining);
    return Value::Function(s.name, [this, &s, scope](CallArgs& args) {
      if (++depth_ > kMaxCallDepth) {
        --depth_;
        throw TemplateError("maximum macro recursion depth exceeded in '" + s.name + "'");
      }
      Frame mf(Resolve(scope));
      TrackedText body;
      try {
        BindParams(s, args, mf);
        ExecList(s.body, mf, &body);
      } catch (...) {
        --depth_;
        throw;
      }
      --depth_;
      return body.TakeValue();
    });
  }

  // ---- expressions ----

  Value ApplyFilterChain(const Expr& e, const Value& subject, Frame& frame) {
    Value v = e.operands[0] ? ApplyFilterChain(*e.operands[0], subject, frame) : subject;
    return CallFilter(e.name, v, EvalArgs(e.args, frame));
  }

  CallArgs EvalArgs(const std::vector<Arg>& args, Frame& frame) {
    CallArgs out;
    for (const Arg& a : args) {
      if (a.name.empty()) {
        out.positional.push_back(Eval(*a.value, frame));
      } else {
        out.keyword.emplace_back(a.name, Eval(*a.value, frame));
      }
    }
    return out;
  }

  Value EvalCall(const Expr& e, Frame& frame, const Value* caller) {
    Value callee = Eval(*e.operands[0], frame);
    CallArgs args = EvalArgs(e.args, frame);
    if (caller) args.keyword.emplace_back("caller", *caller);
    if (callee.is_undefined()) ThrowUndefined(callee);
    if (!callee.is_callable()) TypeErr("'" + TypeName(callee) + "' object is not callable");
    return callee.callable().call(args);
  }

  Value Eval(const Expr& e, Frame& frame) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = frame.Lookup(e.name);
        return v ? *v : Value::Undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        ValueList items;
        items.reserve(e.operands.size());
        for (const auto& o : e.operands) items.push_back(Eval(*o, frame));
        return e.kind == Expr::Kind::kTuple ? Value::Tuple(std::move(items))
                                            : Value::List(std::move(items));
      }
      case Expr::Kind::kDict: {
        ValueDict d;
        for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
          Value k = Eval(*e.operands[i], frame);
          if (!k.is_string()) {
            throw TemplateError("unsupported: dict literal key of type " + TypeName(k), e.line);
          }
          if (k.taint() != nullptr) d.set_keys_tainted(true);
          d.Set(k.as_string(), Eval(*e.operands[i + 1], frame));
        }
        return Value::Dict(std::move(d));
      }
      case Expr::Kind::kGetAttr:
        return GetAttribute(Eval(*e.operands[0], frame), e.name);
      case Expr::Kind::kGetItem:
        return GetItem(Eval(*e.operands[0], frame), Eval(*e.operands[1], frame));
      case Expr::Kind::kSlice:
        return EvalSlice(e, frame);
      case Expr::Kind::kCall:
        return EvalCall(e, frame, nullptr);
      case Expr::Kind::kFilter:
        return CallFilter(e.name, Eval(*e.operands[0], frame), EvalArgs(e.args, frame));
      case Expr::Kind::kTest: {
        bool r = CallTest(e.name, Eval(*e.operands[0], frame), EvalArgs(e.args, frame));
        return Value(e.negated ? !r : r);
      }
      case Expr::Kind::kUnary: {
        Value v = Eval(*e.operands[0], frame);
        if (v.is_undefined()) ThrowUndefined(v);
        if (!v.is_number())
          TypeErr("bad operand type for unary " + e.name + ": '" + TypeName(v) + "'");
        if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
        return v.is_float() ? Value(-v.as_double()) : Value(CheckedSub(0, v.as_int()));
      }
      case Expr::Kind::kBinary:
        return Arithmetic(e.name, Eval(*e.operands[0], frame), Eval(*e.operands[1], frame));
      case Expr::Kind::kCompare: {
        Value left = Eval(*e.operands[0], frame);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = Eval(*e.operands[i + 1], frame);
          if (!CompareOp(e.ops[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::kAnd: {
        Value a = Eval(*e.operands[0], frame);
        return Truthy(a) ? Eval(*e.operands[1], frame) : a;
      }
      case Expr::Kind::kOr: {
        Value a = Eval(*e.operands[0], frame);
        return Truthy(a) ? a : Eval(*e.operands[1], frame);
      }
      case Expr::Kind::kNot:
        return Value(!Truthy(Eval(*e.operands[0], frame)));
      case Expr::Kind::kCondition:
        if (Truthy(Eval(*e.operands[0], frame))) return Eval(*e.operands[1], frame);
        if (e.operands[2]) return Eval(*e.operands[2], frame);
        return Value::Undefined(
            "the inline if-expression evaluated to false and no else "
            "section was defined.");
    }
    return Value();
  }

  Value EvalSlice(const Expr& e, Frame& frame) {
    Value obj = Eval(*e.operands[0], frame);
    std::optional<int64_t> b[3];
    for (int i = 0; i < 3; ++i) {
      if (e.operands[i + 1]) b[i] = SliceBound(Eval(*e.operands[i + 1], frame));
    }
    if (obj.is_undefined()) ThrowUndefined(obj);
    if (obj.is_list()) {
      ValueList out;
      for (int64_t i : SliceIndices(static_cast<int64_t>(obj.list().size()), b[0], b[1], b[2]))
        out.push_back(obj.list()[i]);
      return obj.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
    }
    if (obj.is_string()) {
      const std::u32string cps = DecodeUtf8(obj.as_string());
      return PickCodePoints(obj, cps,
                            SliceIndices(static_cast<int64_t>(cps.size()), b[0], b[1], b[2]));
    }
    TypeErr("'" + TypeName(obj) + "' object is not subscriptable");
  }

  std::tm now_;
  Frame globals_;
  Frame root_;
  int depth_ = 0;
  int64_t steps_ = 0;
  const size_t max_output_bytes_;
};

}  // namespace

TrackedText Execute(const StmtList& program, const ValueDict& variables, const std::tm& now,
                    size_t max_output_bytes) {
  return Interpreter(variables, now, max_output_bytes).Run(program);
}

}  // namespace tessera::chat
