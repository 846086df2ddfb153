#include "common/chat/operators.h"

#include <algorithm>
#include <cmath>

#include "common/chat/methods.h"
#include "common/chat/py_format.h"
#include "common/chat/taint.h"
#include "common/chat/template_error.h"

namespace tessera::chat {
namespace {

[[noreturn]] void TypeErr(const std::string& what) { throw TemplateError("TypeError: " + what); }

[[noreturn]] void IntOverflow() {
  throw TemplateError("OverflowError: integer result outside the engine's 64-bit range");
}

// Python's // and % on ints (the result takes the divisor's sign); b != 0.
int64_t FloorDiv(int64_t a, int64_t b) {
  if (b == -1) return CheckedSub(0, a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorMod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

int64_t IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = CheckedMul(result, base);
    exp >>= 1;
    if (exp > 0) base = CheckedMul(base, base);
  }
  return result;
}

}  // namespace

int64_t CheckedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) IntOverflow();
  return r;
}

int64_t CheckedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) IntOverflow();
  return r;
}

int64_t CheckedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) IntOverflow();
  return r;
}

int64_t TruncToInt(double d) {
  if (std::isnan(d)) throw TemplateError("ValueError: cannot convert float NaN to integer");
  double t = std::trunc(d);
  // 2^63 is exactly representable; every double below it in magnitude fits.
  if (t >= 9223372036854775808.0 || t < -9223372036854775808.0) IntOverflow();
  return static_cast<int64_t>(t);
}

Value Arithmetic(const std::string& op, Value a, const Value& b) {
  if (op == "~") {
    Value left = a.is_string() ? std::move(a) : StrValue(a);
    return b.is_string() ? Concat(std::move(left), b) : Concat(std::move(left), StrValue(b));
  }
  if (a.is_undefined()) ThrowUndefined(a);
  if (b.is_undefined()) ThrowUndefined(b);
  bool nums = a.is_number() && b.is_number();
  bool ints = nums && !a.is_float() && !b.is_float();
  auto unsupported = [&]() {
    TypeErr("unsupported operand type(s) for " + op + ": '" + TypeName(a) + "' and '" +
            TypeName(b) + "'");
  };
  if (op == "+") {
    if (ints) return Value(CheckedAdd(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Concat(std::move(a), b);
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      ValueList l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return a.is_tuple() ? Value::Tuple(std::move(l)) : Value::List(std::move(l));
    }
    if (a.is_string()) TypeErr("can only concatenate str (not \"" + TypeName(b) + "\") to str");
    if (a.is_list()) TypeErr("can only concatenate list (not \"" + TypeName(b) + "\") to list");
    unsupported();
  }
  if (op == "-") {
    if (ints) return Value(CheckedSub(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() - b.as_double());
    unsupported();
  }
  if (op == "*") {
    if (ints) return Value(CheckedMul(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() * b.as_double());
    const Value* seq = (a.is_string() || a.is_list()) ? &a : &b;
    const Value* count = seq == &a ? &b : &a;
    if ((seq->is_string() || seq->is_list()) && (count->is_int() || count->is_bool())) {
      int64_t n = std::max<int64_t>(count->as_int(), 0);
      int64_t unit = seq->is_string() ? static_cast<int64_t>(seq->as_string().size())
                                      : static_cast<int64_t>(seq->list().size()) * 16;
      if (unit > 0 && n > kMaxRepeatBytes / unit) {
        throw TemplateError("MemoryError: repetition result too large");
      }
      // An empty sequence repeats to itself at once, however large the count (a loop of
      // 10^9 empty appends is a hang, found by chat_template_fuzz).
      if (unit == 0) n = 0;
      if (seq->is_string()) {
        TrackedText out;
        out.Reserve(static_cast<size_t>(n) * seq->as_string().size());
        for (int64_t i = 0; i < n; ++i) out.Append(*seq);
        return out.TakeValue();
      }
      ValueList out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->list().begin(), seq->list().end());
      return Value::List(std::move(out));
    }
    unsupported();
  }
  if (op == "%" && a.is_string()) return PercentFormatValue(a, b);
  if (!nums) unsupported();
  if ((op == "/" || op == "//" || op == "%") && b.as_double() == 0) {
    throw TemplateError(op == "/" ? "ZeroDivisionError: division by zero"
                                  : "ZeroDivisionError: integer division or modulo by zero");
  }
  if (op == "/") return Value(a.as_double() / b.as_double());
  if (op == "//") {
    if (ints) return Value(FloorDiv(a.as_int(), b.as_int()));
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (ints) return Value(FloorMod(a.as_int(), b.as_int()));
    double r = std::fmod(a.as_double(), b.as_double());
    if (r != 0 && ((r < 0) != (b.as_double() < 0))) r += b.as_double();
    return Value(r);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) return Value(IntPow(a.as_int(), b.as_int()));
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  unsupported();
  return Value();
}

bool CompareOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in") return Contains(b, a);
  if (op == "not in") return !Contains(b, a);
  if (a.is_undefined()) ThrowUndefined(a);
  if (b.is_undefined()) ThrowUndefined(b);
  int c = Compare(a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

std::optional<int64_t> SliceBound(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_int() && !v.is_bool()) {
    TypeErr("slice indices must be integers or None, not " + TypeName(v));
  }
  return v.as_int();
}

}  // namespace tessera::chat
