// Python's binary operators on engine values, as Jinja2 evaluates them: arithmetic with int
// and float promotion, str/list concatenation and repetition, `%` formatting, `~`, and
// comparisons (chained by the caller).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/chat/value.h"

namespace tessera::chat {

// Results of `*` repetition larger than this many bytes are refused.
constexpr int64_t kMaxRepeatBytes = int64_t{64} << 20;

// Python ints are unbounded, the engine's are int64: a result outside int64 is refused with
// an OverflowError rather than wrapped into a wrong render.
int64_t CheckedAdd(int64_t a, int64_t b);
int64_t CheckedSub(int64_t a, int64_t b);
int64_t CheckedMul(int64_t a, int64_t b);
// int(d) for a float: truncation toward zero; OverflowError outside int64, ValueError for nan.
int64_t TruncToInt(double d);

// `a op b` for op in + - * / // % ** ~. Takes `a` by value so string chains append in place.
Value Arithmetic(const std::string& op, Value a, const Value& b);
// `a op b` for op in == != < <= > >= in, "not in".
bool CompareOp(const std::string& op, const Value& a, const Value& b);
// A slice bound: nullopt for None/Undefined, else an integer (TypeError otherwise).
std::optional<int64_t> SliceBound(const Value& v);

}  // namespace tessera::chat
