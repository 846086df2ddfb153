// The template engine's contract beyond plain rendering: errors are values that name the
// template line, raise_exception's message comes back verbatim, unsupported constructs are
// refused, and hostile templates fail cleanly. Expected strings are derived by hand from
// Jinja2's documented behaviour.
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/chat/template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera::chat {
namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<std::string> Render(const std::string& source, const Json& vars = Json::object()) {
  auto tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) return tmpl.status();
  return tmpl->Render(vars, MakeTime(2026, 1, 15, 12, 0, 0));
}

TEST(ChatEngine, RaiseExceptionReturnsTheMessageVerbatim) {
  auto r = Render("a\n{% if true %}{{ raise_exception('roles must alternate') }}{% endif %}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "roles must alternate");
}

TEST(ChatEngine, EmptySequencesRepeatToEmptyWhateverTheCount) {
  // A fuzzer-found hang: an empty tuple times 10^9 appended nothing a billion times.
  EXPECT_EQ(*Render("[{{ (() * 1111111111) | length }}][{{ ('' * 1111111111) | length }}]"),
            "[0][0]");
  EXPECT_EQ(*Render("{{ ([] * 99999999999) | length }}"), "0");
  auto r = Render("{{ ((1,) * 1111111111) | length }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("too large"), std::string::npos);
}

TEST(ChatEngine, RaiseInsideAMacroPropagates) {
  auto r = Render("{% macro f() %}{{ raise_exception('deep') }}{% endmacro %}x{{ f() }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "deep");
}

TEST(ChatEngine, RunTimeErrorsNameTheLine) {
  auto r = Render("first\nsecond\n{{ nothing.attr }}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "line 3")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "'nothing' is undefined")) << r.status();
}

TEST(ChatEngine, StringMethodsWithoutTheirRequiredArgumentAreTypeErrors) {
  // Python: 'abc'.count() -> TypeError; found by the fuzzer as a crash.
  for (const char* call : {"'abc'.count()", "'abc'.find(none)", "'abc'.replace('a')",
                           "'abc'.startswith()", "'abc'.index()"}) {
    auto r = Render(std::string("{{ ") + call + " }}");
    ASSERT_FALSE(r.ok()) << call;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << call;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "TypeError")) << r.status();
  }
}

TEST(ChatEngine, MissingKeyIsUndefinedButItsAttributeIsAnError) {
  Json vars = {{"m", {{"role", "user"}}}};
  EXPECT_EQ(*Render("[{{ m.content }}][{{ m.content is defined }}]", vars), "[][False]");
  auto r = Render("{{ m.content.strip() }}", vars);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "'dict object' has no attribute 'content'"))
      << r.status();
}

TEST(ChatEngine, UnsupportedTagsAreRefusedWithTheirLine) {
  for (const char* tag : {"include 'x'", "import 'x' as y", "extends 'base'", "do x"}) {
    auto r = Render(std::string("ok\n\n{% ") + tag + " %}");
    ASSERT_FALSE(r.ok()) << tag;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(r.status().message(), "line 3")) << r.status();
  }
  auto recursive = Render("{% for x in y recursive %}{% endfor %}");
  ASSERT_FALSE(recursive.ok());
  EXPECT_TRUE(absl::StrContains(recursive.status().message(), "recursive"));
}

TEST(ChatEngine, UnknownFilterFailsAtParseUnlessInsideAnIf) {
  auto top = ChatTemplate::Parse("a\n{{ x | frobnicate }}");
  ASSERT_FALSE(top.ok());
  EXPECT_TRUE(absl::StrContains(top.status().message(), "line 2"));
  EXPECT_TRUE(absl::StrContains(top.status().message(), "frobnicate"));
  // As in Jinja2 3: inside an if it only fails when reached.
  EXPECT_EQ(*Render("{% if false %}{{ x | frobnicate }}{% endif %}ok"), "ok");
  auto reached = Render("{% if true %}{{ x | frobnicate }}{% endif %}");
  ASSERT_FALSE(reached.ok());
  EXPECT_TRUE(absl::StrContains(reached.status().message(), "frobnicate"));
}

TEST(ChatEngine, SyntaxErrorsNameTheLine) {
  struct Bad {
    const char* source;
    const char* line;
  };
  for (const Bad& b :
       {Bad{"a\n{% if true %}x", "line 2"}, Bad{"\n\n{{ x ", "line 3"}, Bad{"{% for %}", "line 1"},
        Bad{"a\n{# open", "line 2"}, Bad{"{{ 'unterminated }}", "line 1"},
        Bad{"{{ (1 }}", "line 1"}, Bad{"{% endif %}", "line 1"}, Bad{"{{ 1 + }}", "line 1"}}) {
    auto r = ChatTemplate::Parse(b.source);
    ASSERT_FALSE(r.ok()) << b.source;
    EXPECT_TRUE(absl::StrContains(r.status().message(), b.line))
        << b.source << " -> " << r.status();
  }
}

TEST(ChatEngine, SandboxRefusesMutation) {
  auto r = Render("{% set l = [] %}{{ l.append(1) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "unsafe")) << r.status();
}

TEST(ChatEngine, RunawayRecursionFailsCleanly) {
  auto r = Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "recursion")) << r.status();
}

TEST(ChatEngine, HostileTemplatesFailInsteadOfExhaustingTheMachine) {
  // Deep nesting and long operator chains: refused while parsing, not a stack overflow.
  for (const std::string& source :
       {"{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}",
        "{{ 1" +
            [] {
              std::string s;
              for (int i = 0; i < 20000; ++i) s += " + 1";
              return s;
            }() +
            " }}",
        "{{ " + std::string(5000, '-') + "1 }}",
        [] {
          std::string s;
          for (int i = 0; i < 2000; ++i) s += "{% if true %}";
          return s;
        }()}) {
    auto r = ChatTemplate::Parse(source);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), "nested too deeply")) << r.status();
  }
  // Sandbox limits at render time.
  auto range = Render("{{ range(200000) | length }}");
  ASSERT_FALSE(range.ok());
  EXPECT_TRUE(absl::StrContains(range.status().message(), "MAX_RANGE")) << range.status();
  auto repeat = Render("{{ 'ab' * 1000000000000 }}");
  ASSERT_FALSE(repeat.ok());
  auto output = Render("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}");
  ASSERT_FALSE(output.ok());
  EXPECT_TRUE(absl::StrContains(output.status().message(), "output exceeded")) << output.status();
}

TEST(ChatEngine, IntegersBeyondInt64AreRefusedNotWrapped) {
  // Python would print 18446744073709551616; the engine's ints are 64-bit, so it refuses.
  for (const char* source :
       {"{{ 2 ** 64 }}", "{{ 9223372036854775807 + 1 }}", "{{ -(-9223372036854775807 - 1) }}",
        "{{ 1e300 | int }}", "{{ [9223372036854775807, 1] | sum }}"}) {
    auto r = Render(source);
    ASSERT_FALSE(r.ok()) << source;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "OverflowError")) << r.status();
  }
}

TEST(ChatEngine, VariablesMustBeAnObject) {
  auto tmpl = ChatTemplate::Parse("x");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_FALSE(tmpl->Render(Json::array(), MakeTime(2026, 1, 15, 12, 0, 0)).ok());
}

TEST(ChatEngine, StrftimeNowUsesTheGivenClock) {
  // 2026-01-15 is a Thursday, the 15th day of the year.
  EXPECT_EQ(*Render("{{ strftime_now('%Y-%m-%d %H:%M:%S %A %j %d %B %Y') }}"),
            "2026-01-15 12:00:00 Thursday 015 15 January 2026");
}

TEST(ChatEngine, GenerationBlockRendersItsBody) {
  EXPECT_EQ(*Render("{% generation %}{{ 'x' }}y{% endgeneration %}"), "xy");
}

TEST(ChatEngine, JsonIntegersStayIntsAndFloatsStayFloats) {
  Json vars = Json::parse(R"({"i": 3, "f": 3.0, "big": 10000000000, "neg": -1.5e-7})");
  EXPECT_EQ(
      *Render("{{ i }} {{ f }} {{ big }} {{ neg }} {{ i is integer }} {{ f is float }}", vars),
      "3 3.0 10000000000 -1.5e-07 True True");
}

TEST(ChatEngine, ObjectKeyOrderIsKept) {
  Json vars = Json::parse(R"({"d": {"zeta": 1, "alpha": 2, "mid": 3}})");
  EXPECT_EQ(*Render("{{ d | tojson }}|{% for k in d %}{{ k }},{% endfor %}", vars),
            "{\"zeta\": 1, \"alpha\": 2, \"mid\": 3}|zeta,alpha,mid,");
}

TEST(ChatEngine, NonAsciiIsCountedAndSlicedByCodePoint) {
  Json vars = {{"s", "h\u00e9\u65e5\xF0\x9F\x98\x80!"}};  // h é 日 😀 !
  EXPECT_EQ(*Render("{{ s | length }}|{{ s[1:3] }}|{{ s[-2] }}|{{ s[::-1] }}", vars),
            "5|\u00e9\u65e5|\xF0\x9F\x98\x80|!\xF0\x9F\x98\x80\u65e5\u00e9h");
}

TEST(ChatEngine, InvalidUtf8PassesThroughUnchanged) {
  Json vars = {{"s", std::string("a\xff") + "b"}};
  // nlohmann refuses to hold invalid UTF-8 only when dumping; the engine keeps the bytes.
  EXPECT_EQ(*Render("{{ s }}", vars), std::string("a\xff") + "b");
}

TEST(ChatEngine, ParsedTemplateRendersManyTimes) {
  auto tmpl =
      ChatTemplate::Parse("{% set ns = namespace(n=0) %}{% set ns.n = ns.n + x %}{{ ns.n }}");
  ASSERT_TRUE(tmpl.ok());
  // Namespaces are per render: no state leaks from one render to the next.
  EXPECT_EQ(*tmpl->Render(Json{{"x", 1}}, MakeTime(2026, 1, 15, 12, 0, 0)), "1");
  EXPECT_EQ(*tmpl->Render(Json{{"x", 2}}, MakeTime(2026, 1, 15, 12, 0, 0)), "2");
}

}  // namespace
}  // namespace tessera::chat
