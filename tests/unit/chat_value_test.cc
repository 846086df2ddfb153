// Python's formatting and str semantics that the engine reproduces: float repr, repr of
// containers, json.dumps, and code-point string operations. Expected values are Python 3's,
// derived by hand from its documented rules.
#include <optional>
#include <string>
#include <vector>

#include "common/chat/json_dump.h"
#include "common/chat/py_format.h"
#include "common/chat/py_string.h"
#include "common/chat/template_error.h"
#include "common/chat/value.h"
#include "gtest/gtest.h"

namespace tessera::chat {
namespace {

TEST(ChatValue, FloatReprMatchesPython) {
  EXPECT_EQ(FloatRepr(1.0), "1.0");
  EXPECT_EQ(FloatRepr(0.1), "0.1");
  EXPECT_EQ(FloatRepr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FloatRepr(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(FloatRepr(1e15), "1000000000000000.0");
  EXPECT_EQ(FloatRepr(1e16), "1e+16");
  EXPECT_EQ(FloatRepr(0.0001), "0.0001");
  EXPECT_EQ(FloatRepr(0.00001), "1e-05");
  EXPECT_EQ(FloatRepr(-0.0), "-0.0");
  EXPECT_EQ(FloatRepr(1.5e300), "1.5e+300");
  EXPECT_EQ(FloatRepr(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(FloatRepr(123456789.125), "123456789.125");
}

TEST(ChatValue, ReprAndStrMatchPython) {
  ValueDict d;
  d.Set("k", Value("it's"));
  d.Set("n", Value::List({Value(int64_t{1}), Value(2.5), Value::None(), Value(true)}));
  Value v = Value::Dict(std::move(d));
  EXPECT_EQ(ToStr(v), "{'k': \"it's\", 'n': [1, 2.5, None, True]}");
  EXPECT_EQ(Repr(Value("a\nb\\")), "'a\\nb\\\\'");
  EXPECT_EQ(Repr(Value::Tuple({Value(int64_t{1})})), "(1,)");
  EXPECT_EQ(ToStr(Value::Undefined("x")), "");
  EXPECT_EQ(ToStr(Value(false)), "False");
}

TEST(ChatValue, EqualityAndOrderingArePythons) {
  EXPECT_TRUE(Equals(Value(int64_t{1}), Value(1.0)));
  EXPECT_TRUE(Equals(Value(true), Value(int64_t{1})));
  EXPECT_FALSE(Equals(Value("1"), Value(int64_t{1})));
  EXPECT_FALSE(Equals(Value::List({}), Value::Tuple({})));
  EXPECT_LT(Compare(Value("apple"), Value("banana")), 0);
  EXPECT_LT(Compare(Value::List({Value(int64_t{1}), Value(int64_t{2})}),
                    Value::List({Value(int64_t{1}), Value(int64_t{3})})),
            0);
  EXPECT_THROW(Compare(Value("a"), Value(int64_t{1})), TemplateError);
}

TEST(ChatValue, JsonDumpsMatchesPython) {
  ValueDict inner;
  inner.Set("b", Value::List({Value(int64_t{1}), Value("\u00e9\"\n")}));
  inner.Set("a", Value::None());
  Value v = Value::Dict(std::move(inner));
  JsonDumpOptions plain;
  EXPECT_EQ(JsonDumps(v, plain), "{\"b\": [1, \"\u00e9\\\"\\n\"], \"a\": null}");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(JsonDumps(Value("\u00e9\xF0\x9F\x98\x80"), ascii), "\"\\u00e9\\ud83d\\ude00\"");
  JsonDumpOptions indented;
  indented.indent = "  ";
  indented.sort_keys = true;
  EXPECT_EQ(JsonDumps(v, indented),
            "{\n  \"a\": null,\n  \"b\": [\n    1,\n    \"\u00e9\\\"\\n\"\n  ]\n}");
  JsonDumpOptions compact;
  compact.item_separator = ",";
  compact.key_separator = ":";
  EXPECT_EQ(JsonDumps(v, compact), "{\"b\":[1,\"\u00e9\\\"\\n\"],\"a\":null}");
  EXPECT_EQ(JsonDumps(Value(1e16), plain), "1e+16");
  EXPECT_EQ(JsonDumps(Value::List({}), indented), "[]");
  EXPECT_THROW(JsonDumps(Value::Undefined("u"), plain), TemplateError);
}

TEST(ChatValue, StringOperationsWorkOnCodePoints) {
  EXPECT_EQ(CodePointCount("h\u00e9\u65e5"), 3u);
  EXPECT_EQ(PyStrip("\u3000 x \u00a0", std::nullopt, true, true), "x");
  EXPECT_EQ(PyStrip("xxaxx", std::string("x"), true, false), "axx");
  EXPECT_EQ(PySplit("a,,b", std::string(","), -1, false), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(PySplit("  a  b c ", std::nullopt, 1, false), (std::vector<std::string>{"a", "b c "}));
  EXPECT_EQ(PySplit("a,b,c", std::string(","), 1, true), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_EQ(PyReplace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(PyReplace("ab", "", "-", -1), "-a-b-");
  EXPECT_EQ(PyFind("h\u00e9llo", "l", false), 2);
  EXPECT_EQ(PyTitle("hello wORLD 2nd"), "Hello World 2Nd");
  EXPECT_EQ(PyUpper("stra\u00dfe \u00e9"), "STRASSE \u00c9");
  EXPECT_EQ(SliceIndices(5, std::nullopt, std::nullopt, -1), (std::vector<int64_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(SliceIndices(5, 4, 1, -2), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(SliceIndices(5, -2, std::nullopt, std::nullopt), (std::vector<int64_t>{3, 4}));
  EXPECT_THROW(SliceIndices(5, std::nullopt, std::nullopt, 0), TemplateError);
}

TEST(ChatValue, PercentAndFormatMatchPython) {
  EXPECT_EQ(PercentFormat("%s|%5.2f|%-4d|%x|%r",
                          Value::Tuple({Value("a"), Value(3.14159), Value(int64_t{7}),
                                        Value(int64_t{255}), Value("q")})),
            "a| 3.14|7   |ff|'q'");
  // A list is one argument, not an argument tuple.
  EXPECT_EQ(PercentFormat("%s", Value::List({Value(int64_t{1})})), "[1]");
  EXPECT_THROW(PercentFormat("%s %s", Value::Tuple({Value("a")})), TemplateError);
  CallArgs args;
  args.positional = {Value(int64_t{42}), Value("x")};
  args.keyword = {{"w", Value(2.5)}};
  EXPECT_EQ(StrFormat("{0:>5}|{1!r}|{w:.3f}|{{}}", args), "   42|'x'|2.500|{}");
}

}  // namespace
}  // namespace tessera::chat
