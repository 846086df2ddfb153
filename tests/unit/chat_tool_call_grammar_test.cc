// Forced tool-call grammars (common/chat/tool_call_grammar.h). Random sentences of each
// format's grammar (GrammarSampler: walks of the same Matcher that masks tokens while
// serving) are read back by the tool-call parser, and must be calls and nothing else: of the
// allowed function, one unless parallel calls are allowed, with arguments that are objects
// holding every required parameter and values of the declared types and bounds (checked
// here by hand against the fixture's schemas; tests/unit/chat_tool_call_grammar_validate.py
// validates the same samples with Python's jsonschema and its own parser of each format).
#include "common/chat/tool_call_grammar.h"

#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/chat/tool_calls.h"
#include "common/grammar/compiled_grammar.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/matcher.h"
#include "common/grammar/sampler.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/grammar_masks.h"

namespace tessera::chat {
namespace {

using Json = nlohmann::ordered_json;

const char* const kFormats[] = {"glm45",  "deepseek_v3", "deepseek_v31",
                                "hermes", "llama3_json", "mistral"};

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "minLength": 1, "maxLength": 24},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14}},
       "required": ["location", "unit"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "create_event",
      "parameters": {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 30},
        "date": {"type": "string", "format": "date"},
        "attendees": {"type": "array", "items": {"type": "string", "format": "email"},
                      "maxItems": 3},
        "priority": {"type": "integer", "minimum": 0, "maximum": 5},
        "meta": {"$ref": "#/$defs/meta"}},
       "required": ["title", "date", "priority"],
       "$defs": {"meta": {"type": "object", "properties": {"urgent": {"type": "boolean"}},
                          "required": ["urgent"], "additionalProperties": false}}}}},
    {"type": "function", "function": {"name": "ping"}}
  ])");
}

// The checks of the fixture's schemas, written by hand.
void CheckArguments(const std::string& name, const std::string& arguments) {
  SCOPED_TRACE(name + " " + arguments);
  const nlohmann::json a = nlohmann::json::parse(arguments, nullptr, false);
  ASSERT_TRUE(a.is_object());
  if (name == "ping") {
    EXPECT_TRUE(a.empty());
    return;
  }
  if (name == "get_weather") {
    ASSERT_TRUE(a.contains("location") && a["location"].is_string());
    const std::string loc = a["location"];
    EXPECT_FALSE(loc.empty());
    ASSERT_TRUE(a.contains("unit") && a["unit"].is_string());
    EXPECT_TRUE(a["unit"] == "celsius" || a["unit"] == "fahrenheit");
    if (a.contains("days")) {
      ASSERT_TRUE(a["days"].is_number_integer());
      EXPECT_GE(a["days"].get<int64_t>(), 1);
      EXPECT_LE(a["days"].get<int64_t>(), 14);
    }
    for (const auto& [k, v] : a.items()) {
      EXPECT_TRUE(k == "location" || k == "unit" || k == "days") << k;
    }
    return;
  }
  ASSERT_EQ(name, "create_event");
  ASSERT_TRUE(a.contains("title") && a["title"].is_string());
  ASSERT_TRUE(a.contains("date") && a["date"].is_string());
  EXPECT_TRUE(std::regex_match(a["date"].get<std::string>(),
                               std::regex("[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])")));
  ASSERT_TRUE(a.contains("priority") && a["priority"].is_number_integer());
  EXPECT_GE(a["priority"].get<int64_t>(), 0);
  EXPECT_LE(a["priority"].get<int64_t>(), 5);
  if (a.contains("attendees")) {
    ASSERT_TRUE(a["attendees"].is_array());
    EXPECT_LE(a["attendees"].size(), 3u);
    for (const auto& e : a["attendees"]) {
      ASSERT_TRUE(e.is_string());
      EXPECT_TRUE(
          std::regex_match(e.get<std::string>(), std::regex("[^@\\s]+@[^@\\s]+\\.[^@\\s.]+")));
    }
  }
  if (a.contains("meta")) {
    ASSERT_TRUE(a["meta"].is_object());
    ASSERT_TRUE(a["meta"].contains("urgent"));
    EXPECT_TRUE(a["meta"]["urgent"].is_boolean());
    EXPECT_EQ(a["meta"].size(), 1u);
  }
}

std::vector<std::string> Samples(const std::string& gbnf, int n, uint64_t seed) {
  absl::StatusOr<grammar::Grammar> g = grammar::ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf;
  if (!g.ok()) return {};
  grammar::GrammarSampler sampler(*std::move(g));
  std::mt19937_64 rng(seed);
  grammar::SampleOptions so;
  so.max_bytes = 8192;
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::string> s = sampler.Sample(rng, so);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) out.push_back(*s);
  }
  return out;
}

struct Case {
  std::string function;
  bool parallel;
};

TEST(ToolCallGrammar, SentencesParseBackAsValidCalls) {
  const Json tools = Tools();
  for (const char* format : kFormats) {
    for (const Case& c : {Case{"", true}, Case{"", false}, Case{"create_event", true},
                          Case{"get_weather", false}}) {
      SCOPED_TRACE(std::string(format) + " function='" + c.function +
                   "' parallel=" + (c.parallel ? "true" : "false"));
      ToolCallGrammarOptions o;
      o.format = format;
      o.tools = tools;
      o.function = c.function;
      o.parallel = c.parallel;
      absl::StatusOr<std::string> gbnf = ToolCallGbnf(o);
      ASSERT_TRUE(gbnf.ok()) << gbnf.status();
      ChatOutputOptions po;
      po.format = format;
      po.tools = tools;
      po.parse_reasoning = false;
      std::set<std::string> names;
      size_t most_calls = 0;
      for (const std::string& text : Samples(*gbnf, 40, 7)) {
        SCOPED_TRACE(text);
        absl::StatusOr<ParsedChatOutput> out = ParseChatOutput(text, po);
        ASSERT_TRUE(out.ok());
        EXPECT_EQ(out->content, "");
        ASSERT_GE(out->tool_calls.size(), 1u);
        if (!c.parallel) {
          EXPECT_EQ(out->tool_calls.size(), 1u);
        }
        most_calls = std::max(most_calls, out->tool_calls.size());
        for (const ToolCall& call : out->tool_calls) {
          if (!c.function.empty()) {
            EXPECT_EQ(call.name, c.function);
          }
          names.insert(call.name);
          CheckArguments(call.name, call.arguments);
        }
      }
      // The walks reach every allowed function, and several calls where allowed (the walks
      // head for an end after 200 bytes: the short calls of `ping` leave room for more).
      EXPECT_EQ(names.size(), c.function.empty() ? 3u : 1u);
      if (c.parallel && c.function.empty() && std::string(format) != "llama3_json") {
        EXPECT_GT(most_calls, 1u);
      }
    }
  }
}

// Forced calls stream their arguments in pieces (stream_arguments): fed in random pieces,
// the deltas assemble into the calls the whole parse gives (the same JSON values), the first
// delta of each call carries its id and name, and arguments arrive in more than one piece.
TEST(ToolCallGrammar, ArgumentsStreamInPiecesThatAssembleIntoTheCalls) {
  const Json tools = Tools();
  for (const char* format : {"glm45", "hermes", "deepseek_v31"}) {
    SCOPED_TRACE(format);
    ToolCallGrammarOptions o;
    o.format = format;
    o.tools = tools;
    absl::StatusOr<std::string> gbnf = ToolCallGbnf(o);
    ASSERT_TRUE(gbnf.ok()) << gbnf.status();
    ChatOutputOptions po;
    po.format = format;
    po.tools = tools;
    po.stream_arguments = true;
    std::mt19937_64 rng(11);
    int multi_piece_calls = 0;
    for (const std::string& text : Samples(*gbnf, 30, 5)) {
      SCOPED_TRACE(text);
      absl::StatusOr<ParsedChatOutput> whole = ParseChatOutput(text, po);
      ASSERT_TRUE(whole.ok());
      absl::StatusOr<ChatOutputParser> parser = ChatOutputParser::Create(po);
      ASSERT_TRUE(parser.ok());
      std::vector<ToolCall> calls;
      std::vector<int> pieces;
      std::string content;
      auto take = [&](const ChatOutputDelta& d) {
        content += d.content;
        for (const ToolCallDelta& t : d.tool_calls) {
          if (t.index == static_cast<int>(calls.size())) {
            EXPECT_FALSE(t.id.empty());
            EXPECT_FALSE(t.name.empty());
            calls.push_back({t.id, t.name, ""});
            pieces.push_back(0);
          } else {
            ASSERT_LT(t.index, static_cast<int>(calls.size()));
            EXPECT_TRUE(t.id.empty() && t.name.empty()) << "only the first delta names the call";
          }
          calls[t.index].arguments += t.arguments;
          pieces[t.index] += !t.arguments.empty();
        }
      };
      for (size_t at = 0; at < text.size();) {
        const size_t n = std::uniform_int_distribution<size_t>(1, 6)(rng);
        take(parser->Feed(text.substr(at, n)));
        at += n;
      }
      take(parser->Finish());
      EXPECT_EQ(content, "");
      ASSERT_EQ(calls.size(), whole->tool_calls.size());
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(calls[i].name, whole->tool_calls[i].name);
        EXPECT_EQ(nlohmann::json::parse(calls[i].arguments, nullptr, false),
                  nlohmann::json::parse(whole->tool_calls[i].arguments))
            << calls[i].arguments;
        multi_piece_calls += pieces[i] > 1;
      }
    }
    EXPECT_GT(multi_piece_calls, 10);
  }
}

TEST(ToolCallGrammar, ReasoningComesFirstWhenThePromptOpenedIt) {
  ToolCallGrammarOptions o;
  o.format = "glm45";
  o.tools = Tools();
  o.function = "get_weather";
  o.starts_in_reasoning = true;
  absl::StatusOr<std::string> gbnf = ToolCallGbnf(o);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  ChatOutputOptions po;
  po.format = "glm45";
  po.tools = o.tools;
  po.starts_in_reasoning = true;
  int with_reasoning = 0;
  for (const std::string& text : Samples(*gbnf, 30, 3)) {
    SCOPED_TRACE(text);
    EXPECT_NE(text.find("</think>"), std::string::npos);
    absl::StatusOr<ParsedChatOutput> out = ParseChatOutput(text, po);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->content, "");
    ASSERT_EQ(out->tool_calls.size(), 1u);
    EXPECT_EQ(out->tool_calls[0].name, "get_weather");
    with_reasoning += !out->reasoning_content.empty();
  }
  EXPECT_GT(with_reasoning, 0);
}

// A structured-output grammar after reasoning: free text, </think>, then the grammar's own
// sentences. The grammar's rule names survive (a recursive reference to root follows the
// rename; a literal "root" and names that collide with the new rules stay what they were).
TEST(ToolCallGrammar, ConstraintAfterReasoning) {
  const std::string gbnf =
      "# a comment naming root\n"
      "root ::= \"(\" reasoning answer-root? \")\" | \"root\"\n"
      "reasoning ::= [a-c]\n"
      "answer-root ::= root\n";
  const std::string wrapped = GbnfAfterReasoning(gbnf, nullptr);
  SCOPED_TRACE(wrapped);
  ASSERT_TRUE(grammar::ParseGbnf(wrapped).ok());
  auto accepts = [&](const std::string& text) { return testing::GrammarAccepts(wrapped, text); };
  EXPECT_TRUE(accepts("Let me think.</think>\n(a)"));
  EXPECT_TRUE(accepts("</think>(b(c))"));
  EXPECT_TRUE(accepts("hmm <b>x</b> ok</think>root"));
  EXPECT_TRUE(accepts("a << </thin </thinker <</think>(a)"));
  EXPECT_FALSE(accepts("(a)"));                   // the reasoning must be closed first
  EXPECT_FALSE(accepts("x</think>(d)"));          // [a-c] kept its meaning
  EXPECT_FALSE(accepts("x</think>(a)</think>"));  // one answer, nothing after it
  // With </think> a special token, it is named by id.
  const std::string special =
      GbnfAfterReasoning(gbnf, [](std::string_view t) -> std::optional<int32_t> {
        return t == "</think>" ? std::optional<int32_t>(151351) : std::nullopt;
      });
  EXPECT_NE(special.find("<[151351]>"), std::string::npos) << special;
  EXPECT_TRUE(grammar::ParseGbnf(special).ok());
}

TEST(ToolCallGrammar, MarkersThatAreSpecialTokensAreNamedById) {
  ToolCallGrammarOptions o;
  o.format = "glm45";
  o.tools = Tools();
  o.special_token = [](std::string_view text) -> std::optional<int32_t> {
    if (text == "<tool_call>") return 151352;
    if (text == "</tool_call>") return 151353;
    return std::nullopt;
  };
  absl::StatusOr<std::string> gbnf = ToolCallGbnf(o);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  EXPECT_NE(gbnf->find("<[151352]>"), std::string::npos);
  EXPECT_NE(gbnf->find("<[151353]>"), std::string::npos);
  EXPECT_EQ(gbnf->find("\"<tool_call>\""), std::string::npos);
  EXPECT_NE(gbnf->find("\"<arg_key>\""), std::string::npos);  // not special here: text
  EXPECT_TRUE(grammar::ParseGbnf(*gbnf).ok());
}

TEST(ToolCallGrammar, ErrorsNameTheProblem) {
  auto error = [](const std::string& format, const Json& tools, const std::string& function) {
    ToolCallGrammarOptions o;
    o.format = format;
    o.tools = tools;
    o.function = function;
    absl::StatusOr<std::string> g = ToolCallGbnf(o);
    EXPECT_FALSE(g.ok());
    return g.ok() ? std::string() : std::string(g.status().message());
  };
  EXPECT_NE(error("none", Tools(), "").find("--tool-call-parser"), std::string::npos);
  EXPECT_NE(error("hermes", Tools(), "nope").find("'nope' is not among the tools"),
            std::string::npos);
  const Json bad = Json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"x": {"type": "integer",
      "multipleOf": 3}}}}}])");
  EXPECT_EQ(error("hermes", bad, ""),
            "tools[0].function.parameters at /properties/x: unsupported keyword 'multipleOf'");
  EXPECT_EQ(error("glm45", bad, ""),
            "tools[0].function.parameters at /properties/x: unsupported keyword 'multipleOf'");
  const Json raw = Json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"s": {"type": "string",
      "anyOf": [{"maxLength": 3}]}}}}}])");
  EXPECT_NE(error("glm45", raw, "").find("tools[0].function.parameters at /properties/s: 'anyOf'"),
            std::string::npos);
  const Json missing = Json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "required": ["q"]}}}])");
  EXPECT_NE(error("glm45", missing, "").find("required parameter 'q'"), std::string::npos);
}

}  // namespace
}  // namespace tessera::chat
