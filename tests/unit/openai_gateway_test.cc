// The REST gateway's OpenAI protocol: response and chunk shapes field by field (against
// OpenAI's API reference), request-field mapping to the engine, validation and engine
// errors, logprobs, auth, /v1/models, /ready, /metrics. Expected texts follow by hand from
// the ScriptedEngine's rule (it generates its prompt back).
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/chat/tool_calls.h"
#include "common/grammar/compiled_grammar.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/matcher.h"
#include "controller/http/openai_response.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/grammar_masks.h"
#include "tests/unit/gateway_test_util.h"

namespace tessera::testing {
namespace {

using nlohmann::json;

// The chat template of the ScriptedEngine applied to one user message "Hi".
constexpr char kHiRendered[] = "<|user|>Hi\n<|assistant|>";

json Body(const ClientResponse& r) { return json::parse(r.body); }

void ExpectErrorShape(const ClientResponse& r, int status, const std::string& param) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.Header("content-type"), "application/json");
  const json body = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r.body;
  ASSERT_TRUE(body.contains("error")) << r.body;
  const json& e = body["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_FALSE(e["message"].get<std::string>().empty());
  EXPECT_TRUE(e["type"].is_string());
  ASSERT_TRUE(e.contains("param"));
  ASSERT_TRUE(e.contains("code"));
  if (param.empty()) {
    EXPECT_TRUE(e["param"].is_null()) << r.body;
  } else {
    EXPECT_EQ(e["param"], param) << r.body;
  }
}

TEST(OpenAiGatewayTest, ChatCompletionHasOpenAiShape) {
  GatewayUnderTest g;
  const auto r =
      HttpCall(g.port(), "POST", "/v1/chat/completions",
               R"({"model":"scripted-echo","messages":[{"role":"user","content":"Hi"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("content-type"), "application/json");
  const json b = Body(r);
  EXPECT_EQ(b["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_GT(b["id"].get<std::string>().size(), 9u);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_TRUE(b["created"].is_number_integer());
  EXPECT_EQ(b["model"], "scripted-echo");
  ASSERT_EQ(b["choices"].size(), 1u);
  const json& c = b["choices"][0];
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_EQ(c["message"]["content"], kHiRendered);
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(c["finish_reason"], "stop");
  // The chat prompt is the rendered template without BOS: 24 bytes, echoed back.
  EXPECT_EQ(b["usage"], json({{"prompt_tokens", 24},
                              {"completion_tokens", 24},
                              {"total_tokens", 48},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
}

TEST(OpenAiGatewayTest, ContentPartsAndMaxCompletionTokens) {
  GatewayUnderTest g;
  const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions", R"({
      "model":"scripted-echo","max_completion_tokens":5,"max_tokens":100,
      "messages":[{"role":"system","content":[{"type":"text","text":"S"}]},
                  {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json b = Body(r);
  EXPECT_EQ(b["choices"][0]["message"]["content"], "<|sys");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["completion_tokens"], 5);
  ASSERT_EQ(g.engine->requests().size(), 1u);
  EXPECT_EQ(g.engine->requests()[0].max_tokens, 5);
  // "<|system|>S\n<|user|>ab\n<|assistant|>"
  EXPECT_EQ(g.engine->requests()[0].prompt_tokens.size(), 36u);
}

TEST(OpenAiGatewayTest, CompletionHasOpenAiShape) {
  GatewayUnderTest g;
  const auto r =
      HttpCall(g.port(), "POST", "/v1/completions", R"({"model":"scripted-echo","prompt":"abc"})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json b = Body(r);
  EXPECT_EQ(b["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["model"], "scripted-echo");
  ASSERT_EQ(b["choices"].size(), 1u);
  EXPECT_EQ(
      b["choices"][0],
      json({{"index", 0}, {"text", "abc"}, {"logprobs", nullptr}, {"finish_reason", "stop"}}));
  // BOS + 3 bytes in, 3 bytes out.
  EXPECT_EQ(b["usage"], json({{"prompt_tokens", 4},
                              {"completion_tokens", 3},
                              {"total_tokens", 7},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
}

TEST(OpenAiGatewayTest, CompletionPromptForms) {
  GatewayUnderTest g;
  // A list of one string; token ids; a list of one list of ids.
  auto r = HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":["xy"],"max_tokens":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["choices"][0]["text"], "x");
  EXPECT_EQ(Body(r)["choices"][0]["finish_reason"], "length");
  r = HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":[104,105]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["choices"][0]["text"], "hi");
  EXPECT_EQ(Body(r)["usage"]["prompt_tokens"], 2);
  r = HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":[[111,107]]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["choices"][0]["text"], "ok");
  ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":[1,300]})"), 400,
                   "prompt");
  ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":["a","b"]})"), 400,
                   "prompt");
}

// Integers at the edge of int64: found by chat_request_fuzz (a double of 2^63 passed the
// range check made in double and was then converted, undefined behaviour).
TEST(OpenAiGatewayTest, IntegerFieldsAtTheEdgeOfInt64) {
  GatewayUnderTest g;
  for (const char* seed :
       {"9223372036854775808.0", "9223372036854775808", "1e300", "18446744073709551615", "-1e19"}) {
    ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/completions",
                              absl::StrCat(R"({"prompt":"p","max_tokens":1,"seed":)", seed, "}")),
                     400, "seed");
  }
  const auto r = HttpCall(g.port(), "POST", "/v1/completions",
                          R"({"prompt":"p","max_tokens":1,"seed":9223372036854775807})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(g.engine->requests().size(), 1u);
  EXPECT_EQ(*g.engine->requests()[0].sampling.seed, 9223372036854775807u);
}

TEST(OpenAiGatewayTest, RequestFieldsReachTheEngine) {
  GatewayUnderTest g;
  const auto r = HttpCall(g.port(), "POST", "/v1/completions", R"({
      "model":"scripted-echo","prompt":"p","max_tokens":7,"temperature":0.5,"top_p":0.9,
      "top_k":40,"min_p":0.05,"seed":1234,"stop":["x","yz"],"presence_penalty":0.25,
      "frequency_penalty":-0.5,"repetition_penalty":1.1,"ignore_eos":true,"user":"u1"})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(g.engine->requests().size(), 1u);
  const serving::GenerateRequest q = g.engine->requests()[0];
  EXPECT_EQ(q.max_tokens, 7);
  EXPECT_FLOAT_EQ(q.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(q.sampling.top_p, 0.9f);
  EXPECT_EQ(q.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(q.sampling.min_p, 0.05f);
  ASSERT_TRUE(q.sampling.seed.has_value());
  EXPECT_EQ(*q.sampling.seed, 1234u);
  EXPECT_EQ(q.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_FLOAT_EQ(q.sampling.presence_penalty, 0.25f);
  EXPECT_FLOAT_EQ(q.sampling.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(q.sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(q.ignore_eos);
  EXPECT_FALSE(q.request_id.empty());
  // ignore_eos repeats the one-byte prompt up to max_tokens.
  EXPECT_EQ(Body(r)["choices"][0]["text"], "ppppppp");
  EXPECT_EQ(Body(r)["choices"][0]["finish_reason"], "length");

  // A single stop string; it ends the text and is not returned.
  const auto s =
      HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":"hello world","stop":"o w"})");
  ASSERT_EQ(s.status, 200) << s.body;
  EXPECT_EQ(Body(s)["choices"][0]["text"], "hell");
  EXPECT_EQ(Body(s)["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiGatewayTest, SeveralChoicesGetConsecutiveSeeds) {
  GatewayUnderTest g;
  const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"Hi"}],"n":3,"seed":10})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json b = Body(r);
  ASSERT_EQ(b["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b["choices"][i]["index"], i);
    EXPECT_EQ(b["choices"][i]["message"]["content"], kHiRendered);
  }
  // The prompt counts once, the completions add up.
  EXPECT_EQ(b["usage"], json({{"prompt_tokens", 24},
                              {"completion_tokens", 72},
                              {"total_tokens", 96},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  std::vector<uint64_t> seeds;
  for (const auto& q : g.engine->requests()) seeds.push_back(q.sampling.seed.value_or(0));
  std::sort(seeds.begin(), seeds.end());
  EXPECT_EQ(seeds, (std::vector<uint64_t>{10, 11, 12}));
}

TEST(OpenAiGatewayTest, ChatStreamChunks) {
  GatewayUnderTest g;
  const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,
                              "stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Header("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(r.Header("transfer-encoding"), "chunked");
  const std::vector<std::string> data = SseData(r.body);
  // role, "<", "|", "u", finish, usage, [DONE]
  ASSERT_EQ(data.size(), 7u) << r.body;
  EXPECT_EQ(data.back(), "[DONE]");
  std::string id;
  std::string text;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json c = json::parse(data[i]);
    if (i == 0) id = c["id"];
    EXPECT_EQ(c["id"], id);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["model"], "scripted-echo");
    EXPECT_TRUE(c["created"].is_number_integer());
    ASSERT_TRUE(c.contains("usage"));
    if (i + 2 == data.size()) {
      // The usage chunk: no choices.
      EXPECT_TRUE(c["choices"].empty());
      EXPECT_EQ(c["usage"], json({{"prompt_tokens", 24},
                                  {"completion_tokens", 3},
                                  {"total_tokens", 27},
                                  {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
      continue;
    }
    EXPECT_TRUE(c["usage"].is_null());
    ASSERT_EQ(c["choices"].size(), 1u);
    const json& ch = c["choices"][0];
    EXPECT_EQ(ch["index"], 0);
    if (i == 0) {
      EXPECT_EQ(ch["delta"]["role"], "assistant");
      EXPECT_EQ(ch["delta"]["content"], "");
    } else {
      EXPECT_FALSE(ch["delta"].contains("role"));
    }
    if (i == data.size() - 3) {
      EXPECT_EQ(ch["delta"], json::object());
      EXPECT_EQ(ch["finish_reason"], "length");
    } else {
      EXPECT_TRUE(ch["finish_reason"].is_null());
      text += ch["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "<|u");
}

TEST(OpenAiGatewayTest, CompletionStreamWithoutUsage) {
  GatewayUnderTest g;
  const auto r = HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":"abc","stream":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<std::string> data = SseData(r.body);
  ASSERT_EQ(data.size(), 5u) << r.body;  // a, b, c, finish, [DONE]
  EXPECT_EQ(data.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json c = json::parse(data[i]);
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_FALSE(c.contains("usage"));
    const json& ch = c["choices"][0];
    text += ch["text"].get<std::string>();
    EXPECT_EQ(ch["finish_reason"], i == 3 ? json("stop") : json(nullptr));
  }
  EXPECT_EQ(text, "abc");
}

TEST(OpenAiGatewayTest, ChatLogprobs) {
  GatewayUnderTest g;
  const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,
                              "logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = Body(r)["choices"][0]["logprobs"];
  ASSERT_EQ(lp["content"].size(), 2u) << lp;
  // Token 0 is '<' (60) with -1/8; its alternatives are 60 and 61 ('=').
  EXPECT_EQ(lp["content"][0], json({{"token", "<"},
                                    {"logprob", -0.125},
                                    {"bytes", {60}},
                                    {"top_logprobs",
                                     {{{"token", "<"}, {"logprob", -0.125}, {"bytes", {60}}},
                                      {{"token", "="}, {"logprob", -1.125}, {"bytes", {61}}}}}}));
  EXPECT_EQ(lp["content"][1]["token"], "|");
  EXPECT_EQ(lp["content"][1]["logprob"], -0.25);
  EXPECT_TRUE(lp.contains("refusal"));
  ASSERT_EQ(g.engine->requests().size(), 1u);
  EXPECT_TRUE(g.engine->requests()[0].logprobs);
  EXPECT_EQ(g.engine->requests()[0].top_logprobs, 2);
}

TEST(OpenAiGatewayTest, CompletionLogprobs) {
  GatewayUnderTest g;
  const auto r = HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":"ab","logprobs":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json lp = Body(r)["choices"][0]["logprobs"];
  EXPECT_EQ(lp, json({{"tokens", {"a", "b"}},
                      {"token_logprobs", {-0.125, -0.25}},
                      {"top_logprobs", {{{"a", -0.125}}, {{"b", -0.25}}}},
                      {"text_offset", {0, 1}}}));
  // Streamed: each chunk carries its own token; offsets go on counting.
  const auto s = HttpCall(g.port(), "POST", "/v1/completions",
                          R"({"prompt":"ab","logprobs":0,"stream":true})");
  const std::vector<std::string> data = SseData(s.body);
  ASSERT_GE(data.size(), 3u) << s.body;
  EXPECT_EQ(json::parse(data[1])["choices"][0]["logprobs"], json({{"tokens", {"b"}},
                                                                  {"token_logprobs", {-0.25}},
                                                                  {"top_logprobs", {nullptr}},
                                                                  {"text_offset", {1}}}));
}

TEST(OpenAiGatewayTest, ValidationErrorsNameTheField) {
  GatewayUnderTest g;
  const uint16_t p = g.port();
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{not json"), 400, "");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "[1]"), 400, "");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{}"), 400, "messages");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", R"({"messages":[]})"), 400,
                   "messages");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions",
                            R"({"messages":[{"role":"wizard","content":"x"}]})"),
                   400, "messages[0].role");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions",
                            R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"),
                   400, "messages[0].content[0]");
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  ExpectErrorShape(
      HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"temperature":"hot"})"), 400,
      "temperature");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"temperature":3})"),
                   400, "temperature");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"top_p":0})"), 400,
                   "top_p");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"n":0})"), 400, "n");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"max_tokens":0})"),
                   400, "max_tokens");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"max_tokens":1.5})"),
                   400, "max_tokens");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"stop":[1]})"), 400,
                   "stop");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions",
                            "{" + m + R"(,"stream_options":{"include_usage":true}})"),
                   400, "stream_options");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"top_logprobs":3})"),
                   400, "top_logprobs");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions",
                            "{" + m + R"(,"logprobs":true,"top_logprobs":21})"),
                   400, "top_logprobs");
  ExpectErrorShape(
      HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"presence_penalty":-2.5})"), 400,
      "presence_penalty");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/completions", R"({"prompt":"x","logprobs":true})"), 400,
                   "logprobs");
  ExpectErrorShape(HttpCall(p, "POST", "/v1/completions", R"({"prompt":5})"), 400, "prompt");
  const auto wrong_model =
      HttpCall(p, "POST", "/v1/chat/completions", "{" + m + R"(,"model":"gpt-4o"})");
  ExpectErrorShape(wrong_model, 404, "model");
  EXPECT_EQ(Body(wrong_model)["error"]["code"], "model_not_found");
  // None reached the engine.
  EXPECT_TRUE(g.engine->requests().empty());
  EXPECT_TRUE(WaitFor([&] { return g.RouteCount("/v1/chat/completions 400") == 17; }));
}

// Structured output: every field clients use reaches the engine as a grammar; what each
// grammar accepts is checked by matching documents with the grammar engine itself, written
// out by hand (schema order kept, JSON mode, regex, choices, GBNF).
// The grammar of the request a chat body (its fields around `extra`) submits to the engine.
std::string GrammarOf(GatewayUnderTest& g, const std::string& body_start,
                      const std::string& extra) {
  const size_t before = g.engine->requests().size();
  const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions", body_start + extra + "}");
  EXPECT_EQ(r.status, 200) << extra << ": " << r.body;
  if (g.engine->requests().size() != before + 1) return "<not submitted>";
  return g.engine->requests().back().grammar;
}

TEST(OpenAiGatewayTest, StructuredOutputFieldsBecomeTheRequestsGrammar) {
  GatewayUnderTest g;
  const std::string m = R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2)";
  auto grammar_of = [&](const std::string& extra) { return GrammarOf(g, m, extra); };
  auto accepts = GrammarAccepts;
  EXPECT_EQ(grammar_of(""), "");
  EXPECT_EQ(grammar_of(R"(,"response_format":{"type":"text"})"), "");

  // OpenAI json_schema: the properties in the order the request wrote them (z before a).
  const std::string schema =
      R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"boolean"}},)"
      R"("required":["z","a"],"additionalProperties":false})";
  std::string gbnf = grammar_of(R"(,"response_format":{"type":"json_schema","json_schema":)"
                                R"({"name":"s","strict":true,"schema":)" +
                                schema + "}}");
  EXPECT_TRUE(accepts(gbnf, R"({"z":5,"a":true})")) << gbnf;
  EXPECT_FALSE(accepts(gbnf, R"({"a":true,"z":5})")) << gbnf;
  EXPECT_FALSE(accepts(gbnf, R"({"z":5})")) << gbnf;
  // The same schema through vLLM's and llama-server's fields, and as a JSON string.
  EXPECT_EQ(grammar_of(R"(,"structured_outputs":{"json":)" + schema + "}"), gbnf);
  EXPECT_EQ(grammar_of(R"(,"guided_json":)" + schema), gbnf);
  EXPECT_EQ(grammar_of(R"(,"json_schema":)" + schema), gbnf);
  EXPECT_EQ(grammar_of(R"(,"response_format":{"type":"json_object","schema":)" + schema + "}"),
            gbnf);
  EXPECT_EQ(grammar_of(R"(,"guided_json":)" + json(schema).dump()), gbnf);

  gbnf = grammar_of(R"(,"response_format":{"type":"json_object"})");
  EXPECT_TRUE(accepts(gbnf, R"({"k": [1, "two", null]})"));
  EXPECT_FALSE(accepts(gbnf, "[1]"));
  EXPECT_EQ(grammar_of(R"(,"structured_outputs":{"json_object":true})"), gbnf);

  gbnf = grammar_of(R"(,"structured_outputs":{"regex":"[0-9]{2}-[a-c]+"})");
  EXPECT_TRUE(accepts(gbnf, "42-abca"));
  EXPECT_FALSE(accepts(gbnf, "4-a"));
  EXPECT_EQ(grammar_of(R"(,"guided_regex":"[0-9]{2}-[a-c]+")"), gbnf);

  gbnf = grammar_of(R"(,"guided_choice":["yes","no way"])");
  EXPECT_TRUE(accepts(gbnf, "no way"));
  EXPECT_FALSE(accepts(gbnf, "no"));
  EXPECT_EQ(grammar_of(R"(,"structured_outputs":{"choice":["yes","no way"],"backend":"x"})"), gbnf);

  gbnf = grammar_of(R"(,"grammar":"root ::= \"a\" [0-9]+")");
  EXPECT_TRUE(accepts(gbnf, "a123"));
  EXPECT_FALSE(accepts(gbnf, "a"));
  EXPECT_EQ(grammar_of(R"(,"guided_grammar":"root ::= \"a\" [0-9]+")"), gbnf);

  // disable_any_whitespace: compact JSON only.
  gbnf = grammar_of(R"(,"structured_outputs":{"json":)" + schema +
                    R"(,"disable_any_whitespace":true})");
  EXPECT_TRUE(accepts(gbnf, R"({"z":5,"a":true})"));
  EXPECT_FALSE(accepts(gbnf, R"({"z": 5,"a":true})"));
}

TEST(OpenAiGatewayTest, BadStructuredOutputIsA400NamingTheFieldAndPlace) {
  GatewayUnderTest g;
  const uint16_t p = g.port();
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  auto expect_400 = [&](const std::string& extra, const std::string& param,
                        const std::string& message_part) {
    const auto r = HttpCall(p, "POST", "/v1/chat/completions", "{" + m + extra + "}");
    ExpectErrorShape(r, 400, param);
    const json body = json::parse(r.body, nullptr, false);
    EXPECT_NE(body["error"]["message"].get<std::string>().find(message_part), std::string::npos)
        << extra << ": " << r.body;
  };
  expect_400(R"(,"response_format":{"type":"xml"})", "response_format.type", "json_schema");
  expect_400(R"(,"response_format":"json")", "response_format", "object");
  expect_400(R"(,"response_format":{"type":"json_schema","json_schema":{"schema":)"
             R"({"type":"object","properties":{"age":{"type":"integer","multipleOf":5}}}}})",
             "response_format.json_schema.schema",
             "/properties/age: unsupported keyword 'multipleOf'");
  expect_400(R"(,"guided_json":"{not json")", "guided_json", "not valid JSON");
  expect_400(R"(,"structured_outputs":{"regex":"ab(c"})", "structured_outputs.regex", "offset");
  expect_400(R"(,"structured_outputs":{"regex":"a","choice":["b"]})", "structured_outputs",
             "only one");
  expect_400(R"(,"structured_outputs":{"structural_tag":"x"})", "structured_outputs.structural_tag",
             "not supported");
  expect_400(R"(,"guided_choice":[])", "guided_choice", "non-empty");
  expect_400(R"(,"guided_choice":["a",1])", "guided_choice", "[1]");
  expect_400(R"(,"grammar":"root ::= undefined")", "grammar", "undefined");
  expect_400(R"(,"grammar":"root ::= \"a\"","guided_regex":"a")", "grammar", "both");
  EXPECT_TRUE(g.engine->requests().empty());
}

// The checks serving shares with the gRPC API and `tessera generate` (one range, one bound,
// one role list), with `param` named as this request spelled the field.
TEST(OpenAiGatewayTest, SharedChecksNameTheParam) {
  GatewayUnderTest g;
  const uint16_t p = g.port();
  const std::string chat = "/v1/chat/completions";
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  auto message = [](const ClientResponse& r) {
    return Body(r)["error"]["message"].get<std::string>();
  };

  // content: null only on assistant messages; never an empty list of parts.
  ExpectErrorShape(HttpCall(p, "POST", chat, R"({"messages":[{"role":"user","content":null}]})"),
                   400, "messages[0].content");
  ExpectErrorShape(HttpCall(p, "POST", chat,
                            R"({"messages":[{"role":"user","content":"a"},
                                            {"role":"user","content":[]}]})"),
                   400, "messages[1].content");
  ExpectErrorShape(HttpCall(p, "POST", chat, R"({"messages":[{"role":"assistant","content":[]}]})"),
                   400, "messages[0].content");

  // Sampling ranges: the message names parameter, range and value.
  auto hot = HttpCall(p, "POST", chat, "{" + m + R"(,"temperature":2.5})");
  ExpectErrorShape(hot, 400, "temperature");
  EXPECT_EQ(message(hot), "temperature: expected a value in [0, 2] (0 = greedy), got 2.5");
  ExpectErrorShape(HttpCall(p, "POST", chat, "{" + m + R"(,"repetition_penalty":10.5})"), 400,
                   "repetition_penalty");
  ExpectErrorShape(HttpCall(p, "POST", chat, "{" + m + R"(,"top_k":-2})"), 400, "top_k");
  // Beyond float's range: out of range, not undefined.
  ExpectErrorShape(HttpCall(p, "POST", chat, "{" + m + R"(,"presence_penalty":-1e300})"), 400,
                   "presence_penalty");
  // Completions call top_logprobs `logprobs`.
  auto many = HttpCall(p, "POST", "/v1/completions", R"({"prompt":"x","logprobs":21})");
  ExpectErrorShape(many, 400, "logprobs");
  EXPECT_EQ(message(many), "logprobs: expected a value in [0, 20], got 21");

  // Bounded strings: the model name (before the 404 would quote it), stop strings.
  const std::string long_model = R"(,"model":")" + std::string(300, 'm') + R"(")";
  auto model = HttpCall(p, "POST", chat, "{" + m + long_model + "}");
  ExpectErrorShape(model, 400, "model");
  EXPECT_LT(message(model).size(), 200u);
  std::string stops = R"(,"stop":[)";
  for (int i = 0; i < 17; ++i) stops += (i ? R"(,")" : R"(")") + std::to_string(i) + R"(")";
  ExpectErrorShape(HttpCall(p, "POST", chat, "{" + m + stops + "]}"), 400, "stop");
  const std::string long_third = R"(,"stop":["","a",")" + std::string(257, 's') + R"("])";
  ExpectErrorShape(HttpCall(p, "POST", chat, "{" + m + long_third + "}"), 400, "stop[2]");
  const std::string long_lone = R"(,"stop":")" + std::string(257, 's') + R"(")";
  auto lone = HttpCall(p, "POST", chat, "{" + m + long_lone + "}");
  ExpectErrorShape(lone, 400, "stop");
  EXPECT_EQ(message(lone), "stop: expected at most 256 bytes, got 257");
  EXPECT_TRUE(g.engine->requests().empty());

  // Accepted: an assistant message without content; empty stop strings (dropped).
  auto ok = HttpCall(p, "POST", chat,
                     R"({"messages":[{"role":"user","content":"a"},
                                     {"role":"assistant","content":null},
                                     {"role":"user","content":"b"}],"stop":["","x"]})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  ASSERT_EQ(g.engine->requests().size(), 1u);
  EXPECT_EQ(g.engine->requests()[0].stop, (std::vector<std::string>{"x"}));
}

TEST(OpenAiGatewayTest, EngineRefusalsMapToHttpStatuses) {
  GatewayUnderTest g;
  const std::string body = R"({"prompt":"x"})";
  g.engine->Configure([](auto& o) { o.submit_error = absl::ResourceExhaustedError("queue full"); });
  auto r = HttpCall(g.port(), "POST", "/v1/completions", body);
  ExpectErrorShape(r, 429, "");
  EXPECT_EQ(r.Header("retry-after"), "1");
  EXPECT_EQ(Body(r)["error"]["message"], "queue full");
  g.engine->Configure([](auto& o) {
    o.submit_error = absl::InvalidArgumentError("prompt + max_tokens exceeds max_model_len 4096");
  });
  ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/completions", body), 400, "");
  g.engine->Configure([](auto& o) { o.submit_error = absl::UnavailableError("draining"); });
  ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/completions", body), 503, "");
  g.engine->Configure([](auto& o) { o.submit_error = absl::UnauthenticatedError("no"); });
  ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/completions", body), 401, "");
  // Streaming requests refused before any event still get a plain HTTP error.
  g.engine->Configure([](auto& o) { o.submit_error = absl::ResourceExhaustedError("queue full"); });
  ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":"x","stream":true})"),
                   429, "");
}

TEST(OpenAiGatewayTest, FailureAfterStreamingBeganIsAnErrorEvent) {
  GatewayUnderTest g;
  g.engine->Configure([](auto& o) { o.fail_after_tokens = 2; });
  HttpTestConnection c(g.port());
  const auto r = c.Call("POST", "/v1/completions", R"({"prompt":"abcdef","stream":true})");
  ASSERT_EQ(r.status, 200);
  const std::vector<std::string> data = SseData(r.body);
  ASSERT_EQ(data.size(), 3u) << r.body;  // a, b, error; no [DONE]
  const json e = json::parse(data[2]);
  EXPECT_EQ(e["error"]["message"], "worker rank 0 died");
  EXPECT_EQ(e["error"]["type"], "service_unavailable");
  EXPECT_TRUE(c.ClosedByServer());
  // Non-streaming: the error status itself.
  ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":"abcdef"})"), 503,
                   "");
}

TEST(OpenAiGatewayTest, OddBytesAreText) {
  GatewayUnderTest g({}, {}, [] {
    ScriptedEngine::Options o;
    o.raw_text = true;  // the engine breaks its UTF-8 promise; the gateway still answers
    return o;
  }());
  const auto r =
      HttpCall(g.port(), "POST", "/v1/completions", R"({"prompt":[104,255,105],"logprobs":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json b = Body(r);
  EXPECT_EQ(b["choices"][0]["text"], "h\xEF\xBF\xBDi");
  EXPECT_EQ(b["choices"][0]["logprobs"]["tokens"][1], "\xEF\xBF\xBD");
  const auto s = HttpCall(g.port(), "POST", "/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,
                              "stream":true})");
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(SseData(s.body).back(), "[DONE]");
}

TEST(OpenAiGatewayTest, ApiKey) {
  http::GatewayOptions options;
  options.api_key = "sk-test-123";
  options.metrics_text = [] { return std::string("tessera_up 1\n"); };
  GatewayUnderTest g(options);
  const std::string body = R"({"prompt":"x"})";
  auto r = HttpCall(g.port(), "POST", "/v1/completions", body);
  ExpectErrorShape(r, 401, "");
  EXPECT_EQ(Body(r)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(Body(r)["error"]["type"], "invalid_request_error");
  for (const char* bad : {"Bearer sk-test-124", "Bearer sk-test-1234", "Bearer ",
                          "Basic sk-test-123", "sk-test-123", "Bearer  sk-test-123"}) {
    r = HttpCall(g.port(), "POST", "/v1/completions", body, {{"Authorization", bad}});
    ExpectErrorShape(r, 401, "");
    EXPECT_EQ(Body(r)["error"]["code"], "invalid_api_key") << bad;
  }
  EXPECT_EQ(HttpCall(g.port(), "GET", "/v1/models", "", {{"Authorization", "Bearer x"}}).status,
            401);
  EXPECT_EQ(
      HttpCall(g.port(), "POST", "/v1/completions", body, {{"Authorization", "Bearer sk-test-123"}})
          .status,
      200);
  EXPECT_EQ(
      HttpCall(g.port(), "GET", "/v1/models", "", {{"authorization", "bearer sk-test-123"}}).status,
      200);
  // Two Authorization headers are refused, even when both carry the key (the first one was
  // taken before; gRPC refuses two `authorization` entries the same way).
  for (const char* second : {"Bearer sk-test-123", "Bearer wrong"}) {
    HttpTestConnection c(g.port());
    c.WriteRaw(std::string("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                           "Authorization: Bearer sk-test-123\r\nAuthorization: ") +
               second + "\r\n\r\n");
    r = c.Read();
    ExpectErrorShape(r, 401, "");
    EXPECT_EQ(Body(r)["error"]["code"], "invalid_api_key") << second;
  }
  EXPECT_EQ(HttpCall(g.port(), "GET", "/health").status, 200);
  EXPECT_EQ(HttpCall(g.port(), "GET", "/ready").status, 200);
  EXPECT_EQ(HttpCall(g.port(), "GET", "/metrics").status, 200);
  EXPECT_TRUE(g.engine->requests().size() == 1u);
}

TEST(OpenAiGatewayTest, ModelsHealthReadyMetrics) {
  http::GatewayOptions options;
  std::atomic<bool> loaded{false};
  options.ready_details = [&loaded] { return json{{"load_progress", loaded ? 1.0 : 0.5}}; };
  options.metrics_text = [] { return std::string("# TYPE tessera_up gauge\ntessera_up 1\n"); };
  GatewayUnderTest g(options);

  auto r = HttpCall(g.port(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(Body(r), json({{"object", "list"},
                           {"data",
                            {{{"id", "scripted-echo"},
                              {"object", "model"},
                              {"created", 1700000000},
                              {"owned_by", "tessera"},
                              {"max_model_len", 4096}}}}}));
  EXPECT_EQ(Body(HttpCall(g.port(), "GET", "/v1/models/scripted-echo"))["id"], "scripted-echo");
  ExpectErrorShape(HttpCall(g.port(), "GET", "/v1/models/other"), 404, "model");

  EXPECT_EQ(Body(HttpCall(g.port(), "GET", "/health")), json({{"status", "ok"}}));
  g.engine->set_ready(false);
  r = HttpCall(g.port(), "GET", "/ready");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(Body(r)["status"], "not_ready");
  EXPECT_EQ(Body(r)["load_progress"], 0.5);
  EXPECT_TRUE(Body(r)["reason"].is_string());
  EXPECT_EQ(HttpCall(g.port(), "GET", "/health").status, 200);
  g.engine->set_ready(true);
  loaded = true;
  r = HttpCall(g.port(), "GET", "/ready");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Body(r)["load_progress"], 1.0);
  EXPECT_EQ(Body(r)["status"], "ready");

  r = HttpCall(g.port(), "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(r.body, "# TYPE tessera_up gauge\ntessera_up 1\n");

  // No engine yet: /ready and /v1 answer 503, /health 200.
  g.gateway->SetEngine(nullptr);
  EXPECT_EQ(HttpCall(g.port(), "GET", "/ready").status, 503);
  ExpectErrorShape(HttpCall(g.port(), "GET", "/v1/models"), 503, "");
  EXPECT_EQ(HttpCall(g.port(), "GET", "/health").status, 200);
}

TEST(OpenAiGatewayTest, UnknownRouteAndWrongMethod) {
  GatewayUnderTest g;
  auto r = HttpCall(g.port(), "POST", "/v1/embeddings", "{}");
  ExpectErrorShape(r, 404, "");
  EXPECT_EQ(Body(r)["error"]["message"], "Invalid URL (POST /v1/embeddings)");
  r = HttpCall(g.port(), "GET", "/v1/chat/completions");
  ExpectErrorShape(r, 405, "");
  EXPECT_EQ(r.Header("allow"), "POST");
  r = HttpCall(g.port(), "POST", "/health", "{}");
  ExpectErrorShape(r, 405, "");
  EXPECT_EQ(r.Header("allow"), "GET, HEAD");
  // Query strings do not change the route.
  EXPECT_EQ(HttpCall(g.port(), "GET", "/health?verbose=1").status, 200);
  EXPECT_TRUE(WaitFor([&] { return g.RouteCount("other 404") == 1; }));
  // Counted once each answer is written (on the server's threads, so polled).
  EXPECT_TRUE(WaitFor([&] {
    return g.RouteCount("/health 200") == 1 && g.RouteCount("/health 405") == 1 &&
           g.RouteCount("/v1/chat/completions 405") == 1;
  }));
}

// --- Tool calls and reasoning (issue 23) ---

TEST(OpenAiGatewayTest, ToolFieldsAreAcceptedAndCheckedByShape) {
  GatewayUnderTest g;
  const uint16_t p = g.port();
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d",
          "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";
  const std::string history =
      R"("messages":[{"role":"user","content":"Weather?"},
          {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
            "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
          {"role":"tool","tool_call_id":"call_1","content":"sunny"}])";
  for (const std::string& extra :
       {std::string(R"("tool_choice":"auto")"), std::string(R"("tool_choice":"none")"),
        std::string(R"("chat_template_kwargs":{"enable_thinking":false})"),
        // Fields vLLM accepts that Tessera does not use are ignored.
        std::string(R"("skip_special_tokens":true,"some_future_field":{"x":1})")}) {
    const auto r = HttpCall(p, "POST", "/v1/chat/completions",
                            "{" + history + "," + tools + "," + extra + R"(,"max_tokens":2})");
    EXPECT_EQ(r.status, 200) << extra << ": " << r.body;
  }
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("tools":{})", "tools"},
      {R"("tools":[{"type":"retrieval"}])", "tools[0].type"},
      {R"("tools":[{"type":"function"}])", "tools[0].function"},
      {R"("tools":[{"type":"function","function":{"name":1}}])", "tools[0].function.name"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])",
       "tools[0].function.parameters"},
      {tools + R"(,"tool_choice":"sometimes")", "tool_choice"},
      {tools + R"(,"tool_choice":7)", "tool_choice"},
      {tools + R"(,"tool_choice":{"type":"function","function":{"name":"other"}})",
       "tool_choice.function.name"},
      {tools + R"(,"tool_choice":{"type":"function"})", "tool_choice.function.name"},
      {R"("tool_choice":"required")", "tool_choice"},
      // This gateway's model has no tool-call format: a call cannot be forced.
      {tools + R"(,"tool_choice":"required")", "tool_choice"},
      {tools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})",
       "tool_choice"},
      {R"("parallel_tool_calls":"yes")", "parallel_tool_calls"},
      {R"("chat_template_kwargs":[1])", "chat_template_kwargs"},
  };
  for (const auto& [extra, param] : bad) {
    SCOPED_TRACE(extra);
    ExpectErrorShape(HttpCall(p, "POST", "/v1/chat/completions", "{" + m + "," + extra + "}"), 400,
                     param);
  }
  const std::vector<std::pair<std::string, std::string>> bad_messages = {
      {R"({"role":"assistant","tool_calls":{}})", "messages[0].tool_calls"},
      {R"({"role":"assistant","tool_calls":[{"type":"function"}]})",
       "messages[0].tool_calls[0].function"},
      {R"({"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":1}}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"role":"user","content":"x","tool_calls":[]})", "messages[0].tool_calls"},
      {R"({"role":"tool","content":"x","tool_call_id":5})", "messages[0].tool_call_id"},
  };
  for (const auto& [message, param] : bad_messages) {
    SCOPED_TRACE(message);
    ExpectErrorShape(
        HttpCall(p, "POST", "/v1/chat/completions", R"({"messages":[)" + message + "]}"), 400,
        param);
  }
}

// What a model wrote, as the gateway returns it: reasoning, content and hermes tool calls.
constexpr char kToolOutput[] =
    "<think>The user wants weather.</think>Let me check.\n"
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
    "</tool_call>";

chat::ChatOutputOptions HermesOptions() {
  chat::ChatOutputOptions o;
  o.format = "hermes";
  o.tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
          "properties":{"city":{"type":"string"}}}}}])");
  return o;
}

TEST(OpenAiResponseTest, WholeOutputAsMessage) {
  auto parsed = chat::ParseChatOutput(kToolOutput, HermesOptions());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const json m = http::ChatMessageJson(*parsed);
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["content"], "Let me check.");
  EXPECT_EQ(m["reasoning_content"], "The user wants weather.");
  ASSERT_EQ(m["tool_calls"].size(), 1u) << m;
  const json& c = m["tool_calls"][0];
  EXPECT_TRUE(c["id"].get<std::string>().rfind("call_", 0) == 0) << c;
  EXPECT_EQ(c["type"], "function");
  EXPECT_EQ(c["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(c["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));

  // Only a call: content is null; no reasoning: no reasoning_content.
  chat::ParsedChatOutput only_call;
  only_call.tool_calls.push_back({"call_x", "f", "{}"});
  const json m2 = http::ChatMessageJson(only_call);
  EXPECT_TRUE(m2["content"].is_null());
  EXPECT_FALSE(m2.contains("reasoning_content"));
  // Plain text: a string content, no tool_calls.
  const json m3 = http::ChatMessageJson({"hello", "", {}});
  EXPECT_EQ(m3["content"], "hello");
  EXPECT_FALSE(m3.contains("tool_calls"));
  EXPECT_FALSE(m3.contains("reasoning_content"));
}

TEST(OpenAiResponseTest, StreamedOutputAsDeltas) {
  // Fed in pieces of 3 bytes: the deltas assemble into the same message.
  auto parser = chat::ChatOutputParser::Create(HermesOptions());
  ASSERT_TRUE(parser.ok()) << parser.status();
  const std::string text = kToolOutput;
  std::vector<json> deltas;
  for (size_t i = 0; i < text.size(); i += 3) {
    deltas.push_back(http::ChatDeltaJson(parser->Feed(text.substr(i, 3))));
  }
  deltas.push_back(http::ChatDeltaJson(parser->Finish()));
  std::string reasoning, content, name, arguments, id;
  int calls = 0;
  for (const json& d : deltas) {
    EXPECT_FALSE(d.contains("role"));
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) {
      const std::string piece = d["content"];
      EXPECT_EQ(piece.find('<'), std::string::npos) << "markup leaked: " << piece;
      content += piece;
    }
    if (d.contains("tool_calls")) {
      for (const json& c : d["tool_calls"]) {
        EXPECT_EQ(c["index"], 0);
        if (c.contains("id")) {
          ++calls;
          id = c["id"];
          EXPECT_EQ(c["type"], "function");
          name = c["function"]["name"];
        }
        arguments += c["function"]["arguments"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(reasoning, "The user wants weather.");
  EXPECT_EQ(content, "Let me check.");
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(arguments), json({{"city", "Paris"}}));
  // An empty delta is an empty object.
  EXPECT_EQ(http::ChatDeltaJson({}), json::object());
}

// End to end through the gateway: the ScriptedEngine generates its prompt back, so a user
// message carrying the markup comes back as the model's output.
TEST(OpenAiGatewayTest, ToolCallsAndReasoningInResponses) {
  http::GatewayOptions o;
  o.chat_output.tool_call_format = "hermes";
  o.chat_output.parse_reasoning = true;
  GatewayUnderTest g(o);
  const std::string markup =
      json(std::string("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                       "\"Paris\"}}</tool_call>"))
          .dump();
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather",
          "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";
  const std::string req = R"({"messages":[{"role":"user","content":)" + markup + "}]," + tools;
  {
    const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions", req + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    const json ch = Body(r)["choices"][0];
    EXPECT_EQ(ch["finish_reason"], "tool_calls") << r.body;
    ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << r.body;
    EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(ch["message"]["tool_calls"][0]["type"], "function");
    EXPECT_EQ(
        json::parse(ch["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
        json({{"city", "Paris"}}));
    EXPECT_EQ(ch["message"]["content"].get<std::string>().find("<tool_call>"), std::string::npos);
  }
  {
    const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions", req + R"(,"stream":true})");
    ASSERT_EQ(r.status, 200) << r.body;
    const std::vector<std::string> data = SseData(r.body);
    ASSERT_GE(data.size(), 3u) << r.body;
    EXPECT_EQ(data.back(), "[DONE]");
    int calls = 0;
    std::string content;
    for (size_t i = 0; i + 1 < data.size(); ++i) {
      const json d = json::parse(data[i])["choices"][0]["delta"];
      if (d.contains("content")) content += d["content"].get<std::string>();
      if (d.contains("tool_calls")) {
        ++calls;
        EXPECT_EQ(d["tool_calls"][0]["index"], 0);
        EXPECT_EQ(d["tool_calls"][0]["function"]["name"], "get_weather");
      }
    }
    EXPECT_EQ(calls, 1) << r.body;
    EXPECT_EQ(content.find("<tool_call>"), std::string::npos) << content;
    EXPECT_EQ(json::parse(data[data.size() - 2])["choices"][0]["finish_reason"], "tool_calls");
  }
  {
    // tool_choice "none": the markup stays content, no calls.
    const auto r =
        HttpCall(g.port(), "POST", "/v1/chat/completions", req + R"(,"tool_choice":"none"})");
    ASSERT_EQ(r.status, 200) << r.body;
    const json ch = Body(r)["choices"][0];
    EXPECT_FALSE(ch["message"].contains("tool_calls"));
    EXPECT_NE(ch["message"]["content"].get<std::string>().find("<tool_call>"), std::string::npos);
    EXPECT_NE(ch["finish_reason"], "tool_calls");
  }
  {
    // Reasoning split without tools.
    const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions",
                            R"({"messages":[{"role":"user","content":"<think>hmm</think>ok"}]})");
    ASSERT_EQ(r.status, 200) << r.body;
    // The echo starts with the template's "<|user|>", so <think> is not at the start: content.
    const json m = Body(r)["choices"][0]["message"];
    EXPECT_TRUE(m["content"].is_string()) << m;
  }
}

// A forced call (tool_choice "required" or named) reaches the engine as a grammar of calls in
// the model's format: checked by matching documents with the grammar engine, written by hand.
TEST(OpenAiGatewayTest, ForcedToolCallsAreDecodedUnderAGrammar) {
  http::GatewayOptions o;
  o.chat_output.tool_call_format = "hermes";
  o.chat_output.parse_reasoning = true;
  GatewayUnderTest g(o);
  const std::string base =
      R"({"messages":[{"role":"user","content":"x"}],"max_tokens":2,"tools":[)"
      R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
      R"("properties":{"city":{"type":"string"}},"required":["city"],)"
      R"("additionalProperties":false}}},)"
      R"({"type":"function","function":{"name":"ping"}}])";
  auto grammar_of = [&](const std::string& extra) { return GrammarOf(g, base, extra); };
  auto accepts = GrammarAccepts;
  EXPECT_EQ(grammar_of(""), "");
  EXPECT_EQ(grammar_of(R"(,"tool_choice":"auto")"), "");
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>";
  const std::string ping = "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  const std::string required = grammar_of(R"(,"tool_choice":"required")");
  EXPECT_TRUE(accepts(required, weather)) << required;
  EXPECT_TRUE(accepts(required, ping));
  EXPECT_TRUE(accepts(required, weather + "\n" + ping));
  EXPECT_FALSE(accepts(required, "Sure! " + weather));
  EXPECT_FALSE(accepts(required, ""));
  EXPECT_FALSE(accepts(required,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                       "{}}\n</tool_call>"));  // city is required
  const std::string one = grammar_of(R"(,"tool_choice":"required","parallel_tool_calls":false)");
  EXPECT_TRUE(accepts(one, weather));
  EXPECT_FALSE(accepts(one, weather + "\n" + ping));
  const std::string named =
      grammar_of(R"(,"tool_choice":{"type":"function","function":{"name":"ping"}})");
  EXPECT_TRUE(accepts(named, ping));
  EXPECT_FALSE(accepts(named, weather));

  // A forced call and another constraint on the same output: 400 naming tool_choice.
  ExpectErrorShape(HttpCall(g.port(), "POST", "/v1/chat/completions",
                            base + R"(,"tool_choice":"required",)"
                                   R"("response_format":{"type":"json_object"}})"),
                   400, "tool_choice");
  // A schema the grammar cannot write: 400 naming the tool's parameters.
  ExpectErrorShape(
      HttpCall(g.port(), "POST", "/v1/chat/completions",
               R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required",)"
               R"("tools":[{"type":"function","function":{"name":"f","parameters":{)"
               R"("type":"object","properties":{"n":{"type":"integer","multipleOf":2}}}}}]})"),
      400, "tools[0].function.parameters");
  // Reasoning tokens are counted in usage (none here: the echo does not open <think>).
  const auto r = HttpCall(g.port(), "POST", "/v1/chat/completions", base + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r)["usage"]["completion_tokens_details"]["reasoning_tokens"], 0) << r.body;
}

}  // namespace
}  // namespace tessera::testing
