// Tool-call and reasoning parsers (common/chat/tool_calls.h). The round trips take their
// truth from the real chat templates in ../shared/conformance/chat: an assistant message
// with tool calls (and reasoning) is rendered by the template, the assistant's part of the
// prompt is fed back to the parser as if the model had written it, and the same calls,
// content and reasoning must come back — whole, and streamed in pieces of every size.
// The edge cases' expectations are written by hand.
#include "common/chat/tool_calls.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/chat/builtin_templates.h"
#include "common/chat/template.h"
#include "common/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"

namespace tessera::chat {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const std::tm kNow = MakeTime(2026, 1, 15, 12, 0, 0);

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Arguments compared as JSON values, key order aside.
nlohmann::json UnorderedJson(const Json& j) { return nlohmann::json::parse(j.dump()); }
nlohmann::json Unordered(const std::string& s) {
  return nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
}

// Streams `pieces` through a parser and assembles the deltas as an OpenAI client would,
// checking the delta protocol on the way.
ParsedChatOutput StreamPieces(const std::vector<std::string>& pieces,
                              const ChatOutputOptions& options) {
  auto parser = ChatOutputParser::Create(options);
  EXPECT_TRUE(parser.ok()) << parser.status();
  ParsedChatOutput out;
  auto take = [&](const ChatOutputDelta& d) {
    // Every delta must be serializable as JSON text: no UTF-8 sequence cut in two.
    EXPECT_NO_THROW((void)Json(d.content).dump()) << "content delta cuts UTF-8";
    EXPECT_NO_THROW((void)Json(d.reasoning_content).dump()) << "reasoning delta cuts UTF-8";
    out.content += d.content;
    out.reasoning_content += d.reasoning_content;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.index == static_cast<int>(out.tool_calls.size())) {
        EXPECT_FALSE(t.id.empty()) << "the first delta of a call carries its id";
        EXPECT_FALSE(t.name.empty()) << "the first delta of a call carries its name";
        out.tool_calls.push_back({t.id, t.name, ""});
      } else {
        EXPECT_LT(t.index, static_cast<int>(out.tool_calls.size())) << "indices skip";
        EXPECT_TRUE(t.id.empty() && t.name.empty()) << "id/name repeated";
      }
      if (t.index < static_cast<int>(out.tool_calls.size())) {
        out.tool_calls[t.index].arguments += t.arguments;
      }
    }
  };
  for (const std::string& piece : pieces) take(parser->Feed(piece));
  take(parser->Finish());
  return out;
}

// Streams `text` in pieces of `piece` bytes (0: whole).
ParsedChatOutput Stream(std::string_view text, const ChatOutputOptions& options, size_t piece) {
  std::vector<std::string> pieces;
  if (piece == 0) {
    pieces.emplace_back(text);
  } else {
    for (size_t i = 0; i < text.size(); i += piece) pieces.emplace_back(text.substr(i, piece));
  }
  return StreamPieces(pieces, options);
}

ParsedChatOutput Parse(std::string_view text, const ChatOutputOptions& options) {
  auto r = ParseChatOutput(text, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ParsedChatOutput{};
}

ChatOutputOptions Options(const std::string& format, Json tools = nullptr) {
  ChatOutputOptions o;
  o.format = format;
  o.tools = std::move(tools);
  return o;
}

// Byte-level BPE tokenizers of the conformance set (their pieces concatenate back to any
// text), or none when the files are absent.
const std::vector<tokenizer::Tokenizer>& Tokenizers() {
  static const std::vector<tokenizer::Tokenizer>* tokenizers = [] {
    auto* out = new std::vector<tokenizer::Tokenizer>();
    for (const char* name : {"ggml-vocab-deepseek-llm.gguf", "ggml-vocab-gpt-2.gguf"}) {
      auto path = testing::ConformancePath(std::string("tokenizer/") + name);
      if (!path) continue;
      auto tok = tokenizer::Tokenizer::Open(path->string());
      if (tok.ok()) out->push_back(*std::move(tok));
    }
    return out;
  }();
  return *tokenizers;
}

// `text` as a server streams it: tokenized, then each token's bytes detokenized, a piece
// sent once it ends on a whole UTF-8 character (the serving path holds back the rest).
std::vector<std::string> TokenPieces(const tokenizer::Tokenizer& tok, const std::string& text) {
  std::vector<std::string> pieces;
  std::string pending;
  for (tokenizer::TokenId id : tok.Encode(text, {.parse_special = true})) {
    pending.append(tok.Piece(id));
    size_t end = pending.size();
    size_t lead = end;
    while (lead > 0 && (static_cast<unsigned char>(pending[lead - 1]) & 0xC0) == 0x80) --lead;
    if (lead > 0) {
      const unsigned char c = static_cast<unsigned char>(pending[lead - 1]);
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (end - (lead - 1) < need) end = lead - 1;
    }
    if (end > 0) {
      pieces.push_back(pending.substr(0, end));
      pending.erase(0, end);
    }
  }
  if (!pending.empty()) pieces.push_back(pending);
  return pieces;
}

// ---------------------------------------------------------------------------------------
// Round trips through the conformance templates.

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "zip": {"type": "string"}, "days": {"type": "integer"},
      "units": {"type": "object"}, "hourly": {"type": "boolean"},
      "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["city"]}}},
  {"type": "function", "function": {"name": "search", "description": "Web search",
    "parameters": {"type": "object", "properties": {
      "query": {"type": "string"}, "limit": {"type": "number"}}}}}
])");

// Values chosen to catch mistyping: a string of digits that must stay a string, nested
// objects, a float, non-ASCII text, quotes and angle brackets in a string.
const Json kCall1Args = Json::parse(R"({"city": "Paris", "zip": "75001", "days": 3,
  "units": {"temp": "C", "wind": "km/h"}, "hourly": true, "tags": ["a", "b c"]})");
const Json kCall2Args = Json::parse(R"({"query": "café 東京 \"quoted\" <b>x</b>", "limit": 2.5})");

struct TemplateCase {
  std::string file;    // conformance/chat/<file>.jinja
  std::string format;  // what DetectToolCallFormat must say
  // What ends the assistant's turn in the rendered prompt; the model's output stops before
  // it (the end-of-turn token is a stop token, not text).
  std::string end_of_turn;
  bool reasoning;  // the template writes reasoning_content back for the last assistant turn
  bool content;    // the template writes content beside tool calls
  bool parallel;   // the template accepts more than one call per message
};

const std::vector<TemplateCase>& TemplateCases() {
  static const std::vector<TemplateCase> cases = {
      {"GLM-4.6", "glm45", "", true, true, true},
      {"GLM-4.7-Flash", "glm45", "", true, true, true},
      {"Qwen-Qwen2.5-7B-Instruct", "hermes", "<|im_end|>\n", false, true, true},
      {"Qwen-Qwen3-0.6B", "hermes", "<|im_end|>\n", true, true, true},
      // DeepSeek-V3.1 drops reasoning from assistant messages that carry tool calls.
      {"deepseek-ai-DeepSeek-V3.1", "deepseek_v31", "<｜end▁of▁sentence｜>", false, true, true},
      // Llama 3.1 writes a call as the whole message, one call only.
      {"meta-llama-Llama-3.1-8B-Instruct", "llama3_json", "<|eot_id|>", false, false, false},
      // Mistral writes only the calls of a message that has them.
      {"mistralai-Mistral-Nemo-Instruct-2407", "mistral", "</s>", false, false, true},
  };
  return cases;
}

Json ToolCallJson(const std::string& id, const std::string& name, const Json& args) {
  return Json{
      {"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

TEST(ChatToolCalls, EveryToolTemplateIsCovered) {
  TESSERA_REQUIRE_CONFORMANCE(dir, "chat");
  std::set<std::string> covered;
  for (const auto& c : TemplateCases()) covered.insert(c.file);
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".jinja") continue;
    std::string source = ReadFile(e.path());
    std::string stem = e.path().stem().string();
    bool has_tools = source.find("tool_calls") != std::string::npos;
    EXPECT_EQ(has_tools, covered.count(stem) == 1) << stem << ": add it to TemplateCases";
  }
}

TEST(ChatToolCalls, DetectsEachTemplatesFormat) {
  TESSERA_REQUIRE_CONFORMANCE(dir, "chat");
  for (const auto& c : TemplateCases()) {
    EXPECT_EQ(DetectToolCallFormat(ReadFile(dir / (c.file + ".jinja"))), c.format) << c.file;
  }
  EXPECT_EQ(DetectToolCallFormat("{% for m in messages %}{{ m.content }}{% endfor %}"), "none");
}

// One rendering of an assistant turn: template variables beyond the messages, and whether
// the message carries reasoning.
struct Variant {
  std::string name;
  Json kwargs;
  bool with_reasoning;
};

TEST(ChatToolCalls, RoundTripThroughConformanceTemplates) {
  TESSERA_REQUIRE_CONFORMANCE(dir, "chat");
  ASSERT_EQ(Tokenizers().size(), 2u) << "the conformance tokenizers did not load";
  const std::vector<Variant> variants = {
      {"default", Json::object(), true},
      // Thinking off: GLM and Qwen3 close the think block in the generation prompt.
      {"enable_thinking=false", {{"enable_thinking", false}}, false},
      // Thinking on: GLM-4.7 and DeepSeek-V3.1 open <think> in the generation prompt.
      {"enable_thinking=true", {{"enable_thinking", true}}, true},
  };
  std::mt19937 rng(23);
  for (const auto& c : TemplateCases()) {
    SCOPED_TRACE(c.file);
    auto tmpl = ChatTemplate::Parse(ReadFile(dir / (c.file + ".jinja")));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    Json first_case = Json::parse(ReadFile(dir / (c.file + ".json"))).at(0);
    for (const Variant& v : variants) {
      SCOPED_TRACE(v.name);
      const std::string content = c.content ? "Let me check that for you." : "";
      const bool reasons = c.reasoning && v.with_reasoning;
      const std::string reasoning =
          reasons ? "The user wants the weather.\nI should call get_weather, then search." : "";
      Json calls = Json::array();
      calls.push_back(ToolCallJson("call1abcd", "get_weather", kCall1Args));
      if (c.parallel) calls.push_back(ToolCallJson("call2efgh", "search", kCall2Args));

      Json assistant = {{"role", "assistant"}, {"content", content}, {"tool_calls", calls}};
      if (reasons) assistant["reasoning_content"] = reasoning;
      Json user = {{"role", "user"}, {"content", "What's the weather in Paris?"}};

      auto render = [&](Json messages, bool add_generation_prompt) {
        Json vars = {{"messages", std::move(messages)},
                     {"tools", kTools},
                     {"add_generation_prompt", add_generation_prompt},
                     {"bos_token", first_case.value("bos_token", "")},
                     {"eos_token", first_case.value("eos_token", "")},
                     {"kwargs", v.kwargs}};
        AddHuggingFaceDefaults(&vars);
        auto r = tmpl->Render(vars, kNow);
        EXPECT_TRUE(r.ok()) << r.status();
        return r.ok() ? *r : std::string();
      };
      // The model's output is what the full conversation adds to the generation prompt.
      std::string prompt = render(Json::array({user}), true);
      std::string full = render(Json::array({user, assistant}), false);
      ASSERT_FALSE(prompt.empty());
      ASSERT_EQ(full.substr(0, prompt.size()), prompt)
          << "the rendered conversation does not extend the generation prompt";
      std::string output = full.substr(prompt.size());
      ASSERT_GE(output.size(), c.end_of_turn.size());
      ASSERT_EQ(output.substr(output.size() - c.end_of_turn.size()), c.end_of_turn) << output;
      output.resize(output.size() - c.end_of_turn.size());
      SCOPED_TRACE("model output: " + output);

      ChatOutputOptions options = Options(c.format, kTools);
      options.starts_in_reasoning = PromptEndsInReasoning(prompt);

      std::vector<ParsedChatOutput> results = {Parse(output, options)};
      for (size_t piece : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}}) {
        results.push_back(Stream(output, options, piece));
      }
      // Random cuts, as a tokenizer's pieces would fall.
      for (int trial = 0; trial < 10; ++trial) {
        std::vector<std::string> pieces;
        for (size_t at = 0; at < output.size();) {
          size_t n = std::uniform_int_distribution<size_t>(1, 12)(rng);
          pieces.push_back(output.substr(at, n));
          at += n;
        }
        results.push_back(StreamPieces(pieces, options));
      }
      // Token by token, as a model's tokens are detokenized while serving.
      for (const tokenizer::Tokenizer& tok : Tokenizers()) {
        std::vector<std::string> pieces = TokenPieces(tok, output);
        std::string joined;
        for (const std::string& p : pieces) joined += p;
        ASSERT_EQ(joined, output) << "the tokenizer's pieces do not give the text back";
        results.push_back(StreamPieces(pieces, options));
      }
      for (size_t r = 0; r < results.size(); ++r) {
        SCOPED_TRACE(r == 0 ? "whole-message parse" : "streamed, case " + std::to_string(r));
        const ParsedChatOutput& got = results[r];
        EXPECT_EQ(got.content, content);
        EXPECT_EQ(got.reasoning_content, reasoning);
        ASSERT_EQ(got.tool_calls.size(), calls.size());
        std::set<std::string> ids;
        for (size_t i = 0; i < calls.size(); ++i) {
          EXPECT_EQ(got.tool_calls[i].name, calls[i]["function"]["name"].get<std::string>());
          EXPECT_EQ(Unordered(got.tool_calls[i].arguments),
                    UnorderedJson(calls[i]["function"]["arguments"]))
              << got.tool_calls[i].arguments;
          ids.insert(got.tool_calls[i].id);
        }
        EXPECT_EQ(ids.size(), calls.size()) << "call ids must be unique";
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Edge cases, expectations by hand.

TEST(ChatToolCalls, HermesCallWithTextBefore) {
  auto got = Parse(
      "I'll look it up.\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}"
      "\n</tool_call>",
      Options("hermes"));
  EXPECT_EQ(got.content, "I'll look it up.");
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].name, "search");
  EXPECT_EQ(Unordered(got.tool_calls[0].arguments), Unordered(R"({"query":"x"})"));
  EXPECT_EQ(got.tool_calls[0].id.rfind("call_", 0), 0u) << got.tool_calls[0].id;
}

TEST(ChatToolCalls, MarkerSplitAcrossPiecesNeverReachesContent) {
  auto parser = ChatOutputParser::Create(Options("hermes"));
  ASSERT_TRUE(parser.ok());
  std::string content;
  ChatOutputDelta d = parser->Feed("Hi <to");
  EXPECT_EQ(d.content, "Hi");  // "<to" could still become <tool_call>
  content += d.content;
  d = parser->Feed("ol_cal");
  EXPECT_EQ(d.content, "");
  d = parser->Feed("l>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.tool_calls.empty()) << "the call is not complete yet";
  d = parser->Feed("call> done");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].index, 0);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(Unordered(d.tool_calls[0].arguments), Unordered(R"({"a":1})"));
  EXPECT_EQ(d.content, " done");  // whitespace before a call goes with it, not after
  content += d.content;
  content += parser->Finish().content;
  EXPECT_EQ(content, "Hi done");
}

TEST(ChatToolCalls, HoldsBackOnlyWhatCouldBecomeAMarker) {
  auto parser = ChatOutputParser::Create(Options("hermes"));
  ASSERT_TRUE(parser.ok());
  EXPECT_EQ(parser->Feed("if a <b").content, "if a <b");  // "<b" is no marker's start
  EXPECT_EQ(parser->Feed(" and x<").content, " and x");   // "<" could be
  EXPECT_EQ(parser->Feed("= y").content, "<= y");
  EXPECT_EQ(parser->Finish().content, "");
}

TEST(ChatToolCalls, MalformedCallStaysContent) {
  const std::string bad = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>";
  for (size_t piece : {size_t{0}, size_t{1}}) {
    auto got = Stream("Before " + bad + " after", Options("hermes"), piece);
    EXPECT_EQ(got.content, "Before " + bad + " after");
    EXPECT_TRUE(got.tool_calls.empty());
  }
  // A malformed call does not swallow the good call after it.
  for (size_t piece : {size_t{0}, size_t{1}}) {
    auto got = Stream(bad + "\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>",
                      Options("hermes"), piece);
    EXPECT_EQ(got.content, bad);
    ASSERT_EQ(got.tool_calls.size(), 1u);
    EXPECT_EQ(got.tool_calls[0].name, "g");
  }
  // A call that never closes and does not read as one.
  auto got = Parse("<tool_call>\n{\"name\": \"f\"", Options("hermes"));
  EXPECT_EQ(got.content, "<tool_call>\n{\"name\": \"f\"");
  EXPECT_TRUE(got.tool_calls.empty());
  // DeepSeek without the separator; GLM with a stray text between pairs.
  got = Parse("<｜tool▁call▁begin｜>f{}<｜tool▁call▁end｜>", Options("deepseek_v31"));
  EXPECT_EQ(got.content, "<｜tool▁call▁begin｜>f{}<｜tool▁call▁end｜>");
  EXPECT_TRUE(got.tool_calls.empty());
  got = Parse("<tool_call>f\nstray<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
              Options("glm45"));
  EXPECT_EQ(got.content,
            "<tool_call>f\nstray<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>");
  EXPECT_TRUE(got.tool_calls.empty());
}

TEST(ChatToolCalls, HermesEndMarkerInsideAnArgument) {
  const std::string text =
      "<tool_call>\n{\"name\": \"write\", \"arguments\": {\"text\": \"a </tool_call> b\"}}"
      "\n</tool_call>";
  for (size_t piece : {size_t{0}, size_t{1}}) {
    auto got = Stream(text, Options("hermes"), piece);
    EXPECT_EQ(got.content, "");
    ASSERT_EQ(got.tool_calls.size(), 1u);
    EXPECT_EQ(Unordered(got.tool_calls[0].arguments), Unordered(R"({"text": "a </tool_call> b"})"));
  }
}

TEST(ChatToolCalls, UnclosedButCompleteCallIsACall) {
  auto got = Parse("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n", Options("hermes"));
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].name, "f");
  EXPECT_EQ(got.tool_calls[0].arguments, "{}");
  EXPECT_EQ(got.content, "");
}

TEST(ChatToolCalls, TwoParallelCalls) {
  const std::string text =
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"y\": [2]}}\n</tool_call>";
  for (size_t piece : {size_t{0}, size_t{1}, size_t{5}}) {
    auto got = Stream(text, Options("hermes"), piece);
    EXPECT_EQ(got.content, "");
    ASSERT_EQ(got.tool_calls.size(), 2u);
    EXPECT_EQ(got.tool_calls[0].name, "a");
    EXPECT_EQ(got.tool_calls[1].name, "b");
    EXPECT_EQ(Unordered(got.tool_calls[0].arguments), Unordered(R"({"x":1})"));
    EXPECT_EQ(Unordered(got.tool_calls[1].arguments), Unordered(R"({"y":[2]})"));
    EXPECT_NE(got.tool_calls[0].id, got.tool_calls[1].id);
  }
}

TEST(ChatToolCalls, NoCallsInAnyFormat) {
  for (const std::string& format : ToolCallFormats()) {
    SCOPED_TRACE(format);
    for (size_t piece : {size_t{0}, size_t{1}}) {
      auto got = Stream("Paris is the capital of France. [1] {see} <ref>", Options(format), piece);
      EXPECT_EQ(got.content, "Paris is the capital of France. [1] {see} <ref>");
      EXPECT_EQ(got.reasoning_content, "");
      EXPECT_TRUE(got.tool_calls.empty());
    }
  }
}

TEST(ChatToolCalls, GlmValuesAreTypedByTheSchema) {
  const std::string text =
      "<tool_call>get_weather\n<arg_key>zip</arg_key>\n<arg_value>75001</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>three</arg_value>\n"
      "<arg_key>units</arg_key>\n<arg_value>{\"temp\": \"C\"}</arg_value>\n"
      "<arg_key>city</arg_key>\n<arg_value>true</arg_value>\n"
      "<arg_key>extra</arg_key>\n<arg_value>[1, 2]</arg_value>\n</tool_call>";
  auto got = Parse(text, Options("glm45", kTools));
  ASSERT_EQ(got.tool_calls.size(), 1u);
  // zip and city are strings in the schema; days is an integer that does not parse, so it
  // stays text; units parses; extra has no schema and is read as JSON.
  EXPECT_EQ(Unordered(got.tool_calls[0].arguments),
            Unordered(R"({"zip": "75001", "days": "three", "units": {"temp": "C"},
                          "city": "true", "extra": [1, 2]})"));
  // GLM-4.7 writes the pairs without newlines, and a call may have no arguments.
  got = Parse(
      "<tool_call>search<arg_key>limit</arg_key><arg_value>5</arg_value></tool_call>"
      "<tool_call>ping</tool_call>",
      Options("glm45", kTools));
  ASSERT_EQ(got.tool_calls.size(), 2u);
  EXPECT_EQ(Unordered(got.tool_calls[0].arguments), Unordered(R"({"limit": 5})"));
  EXPECT_EQ(got.tool_calls[1].name, "ping");
  EXPECT_EQ(got.tool_calls[1].arguments, "{}");
}

// DeepSeek-V3's format (function<｜tool▁sep｜>name and a ```json block), through the built-in
// deepseek3 template, which writes it as DeepSeek-V3's own template does.
TEST(ChatToolCalls, DeepSeekV3RoundTripThroughTheBuiltinTemplate) {
  std::optional<std::string> source = BuiltinTemplate("deepseek3");
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(DetectToolCallFormat(*source), "deepseek_v3");
  auto tmpl = ChatTemplate::Parse(*source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  Json calls = Json::array(
      {ToolCallJson("a", "get_weather", kCall1Args), ToolCallJson("b", "search", kCall2Args)});
  Json user = {{"role", "user"}, {"content", "Weather?"}};
  Json assistant = {{"role", "assistant"}, {"content", "Checking."}, {"tool_calls", calls}};
  auto render = [&](Json messages, bool add_generation_prompt) {
    Json vars = {{"messages", std::move(messages)},
                 {"tools", kTools},
                 {"add_generation_prompt", add_generation_prompt},
                 {"bos_token", "<｜begin▁of▁sentence｜>"},
                 {"eos_token", "<｜end▁of▁sentence｜>"}};
    AddHuggingFaceDefaults(&vars);
    auto r = tmpl->Render(vars, kNow);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::string();
  };
  const std::string prompt = render(Json::array({user}), true);
  std::string output = render(Json::array({user, assistant}), false).substr(prompt.size());
  const std::string eos = "<｜end▁of▁sentence｜>";
  ASSERT_EQ(output.substr(output.size() - eos.size()), eos) << output;
  output.resize(output.size() - eos.size());
  SCOPED_TRACE(output);
  for (size_t piece : {size_t{0}, size_t{1}, size_t{5}}) {
    ParsedChatOutput got = Stream(output, Options("deepseek_v3", kTools), piece);
    EXPECT_EQ(got.content, "Checking.");
    ASSERT_EQ(got.tool_calls.size(), 2u);
    EXPECT_EQ(got.tool_calls[0].name, "get_weather");
    EXPECT_EQ(Unordered(got.tool_calls[0].arguments), UnorderedJson(kCall1Args));
    EXPECT_EQ(got.tool_calls[1].name, "search");
    EXPECT_EQ(Unordered(got.tool_calls[1].arguments), UnorderedJson(kCall2Args));
  }
  // V3.1's parser does not read V3's calls as calls.
  EXPECT_TRUE(Parse(output, Options("deepseek_v31", kTools)).tool_calls.empty());
}

TEST(ChatToolCalls, DeepSeekTextBeforeCalls) {
  const std::string text =
      "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": \"é\"}"
      "<｜tool▁call▁end｜><｜tool▁call▁begin｜>g<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>";
  for (size_t piece : {size_t{0}, size_t{1}, size_t{4}}) {
    auto got = Stream(text, Options("deepseek_v31"), piece);
    EXPECT_EQ(got.content, "Sure.");
    ASSERT_EQ(got.tool_calls.size(), 2u);
    EXPECT_EQ(got.tool_calls[0].name, "f");
    EXPECT_EQ(Unordered(got.tool_calls[0].arguments), Unordered(R"({"a": "é"})"));
    EXPECT_EQ(got.tool_calls[1].name, "g");
  }
}

TEST(ChatToolCalls, Llama3WholeMessageCall) {
  auto got = Parse("{\"name\": \"f\", \"parameters\": {\"a\": 1}}", Options("llama3_json"));
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].name, "f");
  EXPECT_EQ(Unordered(got.tool_calls[0].arguments), Unordered(R"({"a":1})"));
  got = Parse("<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", Options("llama3_json"));
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.content, "");
  // JSON that is not a call, and a call with text after it, are content.
  got = Parse("{\"answer\": 42}", Options("llama3_json"));
  EXPECT_EQ(got.content, "{\"answer\": 42}");
  EXPECT_TRUE(got.tool_calls.empty());
  got = Parse("{\"name\": \"f\", \"parameters\": {}} and more", Options("llama3_json"));
  EXPECT_EQ(got.content, "{\"name\": \"f\", \"parameters\": {}} and more");
  EXPECT_TRUE(got.tool_calls.empty());
}

TEST(ChatToolCalls, MistralIdsAndCalls) {
  auto got = Parse(
      "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"s\": \"]}\"}, \"id\": \"abc123XYZ\"}, "
      "{\"name\": \"g\", \"arguments\": {}}]",
      Options("mistral"));
  ASSERT_EQ(got.tool_calls.size(), 2u);
  EXPECT_EQ(got.tool_calls[0].id, "abc123XYZ");
  EXPECT_EQ(Unordered(got.tool_calls[0].arguments), Unordered(R"({"s":"]}"})"));
  // Generated ids take the form Mistral's template accepts back: 9 alphanumerics.
  ASSERT_EQ(got.tool_calls[1].id.size(), 9u);
  for (char ch : got.tool_calls[1].id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)));
  got = Parse("[TOOL_CALLS] not a list", Options("mistral"));
  EXPECT_EQ(got.content, "[TOOL_CALLS] not a list");
  EXPECT_TRUE(got.tool_calls.empty());
}

TEST(ChatToolCalls, Reasoning) {
  for (size_t piece : {size_t{0}, size_t{1}, size_t{3}}) {
    SCOPED_TRACE(piece);
    auto got = Stream("<think>\nStep 1.\nStep 2.\n</think>\n\nThe answer.", Options("none"), piece);
    EXPECT_EQ(got.reasoning_content, "Step 1.\nStep 2.");
    EXPECT_EQ(got.content, "The answer.");
    // The prompt opened <think> itself (GLM-4.7): the output starts as reasoning.
    ChatOutputOptions in_think = Options("glm45");
    in_think.starts_in_reasoning = true;
    got = Stream("Hmm.</think>Yes.<tool_call>f</tool_call>", in_think, piece);
    EXPECT_EQ(got.reasoning_content, "Hmm.");
    EXPECT_EQ(got.content, "Yes.");
    ASSERT_EQ(got.tool_calls.size(), 1u);
    // A call written while thinking is part of the reasoning, not a call.
    got = Stream("<think>maybe <tool_call>f</tool_call></think>ok", Options("glm45"), piece);
    EXPECT_EQ(got.reasoning_content, "maybe <tool_call>f</tool_call>");
    EXPECT_EQ(got.content, "ok");
    EXPECT_TRUE(got.tool_calls.empty());
    // Output cut off while thinking: all of it is reasoning.
    got = Stream("<think>still going", Options("hermes"), piece);
    EXPECT_EQ(got.reasoning_content, "still going");
    EXPECT_EQ(got.content, "");
    // Reasoning parsing off: the markup is content.
    ChatOutputOptions off = Options("none");
    off.parse_reasoning = false;
    got = Stream("<think>r</think>c", off, piece);
    EXPECT_EQ(got.reasoning_content, "");
    EXPECT_EQ(got.content, "<think>r</think>c");
    // <think> only opens reasoning at the start of the output.
    got = Stream("a <think>b</think>", Options("none"), piece);
    EXPECT_EQ(got.content, "a <think>b</think>");
    // A prefix of <think> that turns out to be something else.
    got = Stream("<thin ice", Options("none"), piece);
    EXPECT_EQ(got.content, "<thin ice");
  }
}

// Every prefix of an output (a generation cut off at any character) parses the same whole as
// streamed a byte at a time: what the stream holds back and releases at Finish is exactly
// what the whole parse decides.
TEST(ChatToolCalls, EveryPrefixStreamsAsItParses) {
  struct Sample {
    std::string format;
    bool starts_in_reasoning;
    std::string text;
    size_t calls;
  };
  const std::vector<Sample> samples = {
      {"hermes", false,
       "<think>\nplan\n</think>\n\nOK.\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
       "{\"a\": \"</tool_call>\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", "
       "\"arguments\": {}}\n</tool_call> tail",
       2},
      {"glm45", true,
       "plan</think>OK.<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"
       "<tool_call>bad<arg_key>a</arg_key></tool_call>",
       1},
      {"deepseek_v31", false,
       "é<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": [1]}"
       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       1},
      {"llama3_json", false, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}", 1},
      {"llama3_json", false, "  {\"name\": \"f\", \"parameters\": {}}", 1},
      {"mistral", false, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"s\": \"\\\"]\"}}] after",
       1},
  };
  for (const Sample& sample : samples) {
    SCOPED_TRACE(sample.format + ": " + sample.text);
    ChatOutputOptions options = Options(sample.format);
    options.starts_in_reasoning = sample.starts_in_reasoning;
    for (size_t n = 0; n <= sample.text.size(); ++n) {
      // Outputs are whole characters (the detokenizer's text); pieces are any bytes.
      if (n < sample.text.size() && (static_cast<unsigned char>(sample.text[n]) & 0xC0) == 0x80) {
        continue;
      }
      std::string prefix = sample.text.substr(0, n);
      SCOPED_TRACE("prefix " + prefix);
      ParsedChatOutput whole = Parse(prefix, options);
      ParsedChatOutput streamed = Stream(prefix, options, 1);
      EXPECT_EQ(streamed.content, whole.content);
      EXPECT_EQ(streamed.reasoning_content, whole.reasoning_content);
      ASSERT_EQ(streamed.tool_calls.size(), whole.tool_calls.size());
      for (size_t i = 0; i < whole.tool_calls.size(); ++i) {
        EXPECT_EQ(streamed.tool_calls[i].name, whole.tool_calls[i].name);
        EXPECT_EQ(streamed.tool_calls[i].arguments, whole.tool_calls[i].arguments);
      }
    }
    // The complete sample: its calls are found.
    EXPECT_EQ(Parse(sample.text, options).tool_calls.size(), sample.calls);
  }
}

TEST(ChatToolCalls, PromptEndsInReasoning) {
  EXPECT_TRUE(PromptEndsInReasoning("<|assistant|><think>"));
  EXPECT_TRUE(PromptEndsInReasoning("<｜Assistant｜><think>\n"));
  EXPECT_FALSE(PromptEndsInReasoning("<｜Assistant｜><think></think>"));
  EXPECT_FALSE(PromptEndsInReasoning("<|im_start|>assistant\n"));
  EXPECT_FALSE(PromptEndsInReasoning(""));
}

TEST(ChatToolCalls, UnknownFormatIsAnError) {
  EXPECT_FALSE(ChatOutputParser::Create(Options("bogus")).ok());
  EXPECT_FALSE(ParseChatOutput("x", Options("bogus")).ok());
}

TEST(ChatToolCalls, FeedAfterFinishIsIgnored) {
  auto parser = ChatOutputParser::Create(Options("hermes"));
  ASSERT_TRUE(parser.ok());
  EXPECT_EQ(parser->Feed("a").content, "a");
  EXPECT_TRUE(parser->Finish().empty());
  EXPECT_TRUE(parser->Feed("b").empty());
  EXPECT_TRUE(parser->Finish().empty());
}

}  // namespace
}  // namespace tessera::chat
