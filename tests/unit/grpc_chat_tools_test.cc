// Tools, tool calls and reasoning in the gRPC Chat call (issue 23): the ChatRequest's fields
// as the OpenAI-shaped JSON serving's tool calling takes (expected values written by hand from
// OpenAI's chat API), errors naming the request's own fields, a forced call's grammar, and
// the parsed output in GenerateResponse chunks (tool_calls, reasoning_content,
// finish_reason "tool_calls", usage.reasoning_tokens) through a real GrpcServer.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "controller/grpc/grpc_server.h"
#include "controller/grpc/request_convert.h"
#include "controller/grpc/response_convert.h"
#include "controller/serving/request_validation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tessera/v1/inference.grpc.pb.h"
#include "tests/support/scripted_engine.h"

namespace tessera::grpc_api {
namespace {

namespace v1 = tessera::v1;
using ojson = nlohmann::ordered_json;
using ::tessera::testing::ScriptedEngine;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr char kWeatherSchema[] =
    R"({"type": "object", "properties": {"unit": {"enum": ["c", "f"]}, "city": {"type": "string"}},
        "required": ["city"]})";

v1::ChatRequest WeatherChat() {
  v1::ChatRequest r;
  v1::ChatMessage* m = r.add_messages();
  m->set_role("user");
  m->set_content("Weather in Oslo?");
  v1::Tool* tool = r.add_tools();
  tool->mutable_function()->set_name("get_weather");
  tool->mutable_function()->set_description("The weather at a place");
  tool->mutable_function()->set_parameters_json(kWeatherSchema);
  v1::Tool* ping = r.add_tools();
  ping->set_type("function");
  ping->mutable_function()->set_name("ping");
  return r;
}

// The whole conversation a client sends back after a call: the assistant's call and the
// tool's result.
v1::ChatRequest ConversationWithResult() {
  v1::ChatRequest r = WeatherChat();
  v1::ChatMessage* a = r.add_messages();
  a->set_role("assistant");
  a->set_reasoning_content("The user wants the weather.");
  v1::ToolCall* call = a->add_tool_calls();
  call->set_id("call_1");
  call->mutable_function()->set_name("get_weather");
  call->mutable_function()->set_arguments(R"({"city": "Oslo", "unit": "c"})");
  v1::ChatMessage* t = r.add_messages();
  t->set_role("tool");
  t->set_tool_call_id("call_1");
  t->set_name("get_weather");
  t->set_content(R"({"temperature": 21})");
  r.set_chat_template_kwargs_json(R"({"enable_thinking": false, "a": [1]})");
  r.set_parallel_tool_calls(false);
  return r;
}

TEST(GrpcChatInputTest, ToolsCallsAndKwargsBecomeOpenAiShapedJson) {
  absl::StatusOr<ChatInput> in = ToChatInput(ConversationWithResult());
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ(in->messages.size(), 3u);
  EXPECT_EQ(in->messages[1].role, "assistant");
  EXPECT_EQ(in->messages[1].content, "");
  EXPECT_EQ(in->messages[2].content, R"({"temperature": 21})");

  const serving::ToolCalling& tc = in->tool_calling;
  // OpenAI's tools array; the schema's keys in the order the client wrote them.
  EXPECT_EQ(tc.tools.dump(),
            R"([{"type":"function","function":{"name":"get_weather",)"
            R"("description":"The weather at a place","parameters":{"type":"object",)"
            R"("properties":{"unit":{"enum":["c","f"]},"city":{"type":"string"}},)"
            R"("required":["city"]}}},{"type":"function","function":{"name":"ping"}}])");
  EXPECT_EQ(tc.choice, "auto");
  EXPECT_FALSE(tc.parallel);
  EXPECT_EQ(tc.template_kwargs.dump(), R"({"enable_thinking":false,"a":[1]})");
  ASSERT_EQ(tc.message_extras.size(), 3u);
  EXPECT_TRUE(tc.message_extras[0].is_null());
  // Arguments stay the client's JSON text, as OpenAI sends them.
  EXPECT_EQ(tc.message_extras[1].dump(),
            R"({"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather",)"
            R"("arguments":"{\"city\": \"Oslo\", \"unit\": \"c\"}"}}],)"
            R"("reasoning_content":"The user wants the weather."})");
  EXPECT_EQ(tc.message_extras[2].dump(), R"({"tool_call_id":"call_1","name":"get_weather"})");

  // What the template receives.
  const serving::ChatTemplateExtras extras = serving::TemplateExtras(tc);
  EXPECT_EQ(ojson::parse(extras.vars)["enable_thinking"], false);
  EXPECT_EQ(ojson::parse(extras.vars)["tools"], tc.tools);
  EXPECT_EQ(extras.message_fields.size(), 3u);
}

TEST(GrpcChatInputTest, ChoiceFromToolChoiceAndToolChoiceFunction) {
  struct Case {
    std::string choice, function, want_choice, want_function;
  };
  for (const Case& c : std::vector<Case>{{"", "", "auto", ""},
                                         {"none", "", "none", ""},
                                         {"required", "", "required", ""},
                                         {"", "ping", "function", "ping"},
                                         {"function", "get_weather", "function", "get_weather"}}) {
    v1::ChatRequest r = WeatherChat();
    r.set_tool_choice(c.choice);
    r.set_tool_choice_function(c.function);
    absl::StatusOr<ChatInput> in = ToChatInput(r);
    ASSERT_TRUE(in.ok()) << c.choice << "/" << c.function << ": " << in.status();
    EXPECT_EQ(in->tool_calling.choice, c.want_choice);
    EXPECT_EQ(in->tool_calling.function, c.want_function);
    EXPECT_TRUE(in->tool_calling.parallel);  // absent: true
    EXPECT_TRUE(in->tool_calling.message_extras.empty());
  }
  // No tools: null, as a REST request without `tools`.
  v1::ChatRequest plain;
  plain.add_messages()->set_role("user");
  absl::StatusOr<ChatInput> in = ToChatInput(plain);
  ASSERT_TRUE(in.ok());
  EXPECT_TRUE(in->tool_calling.tools.is_null());
  EXPECT_TRUE(in->tool_calling.template_kwargs.is_null());
}

// Each bad request is INVALID_ARGUMENT whose message starts with the field it names.
TEST(GrpcChatInputTest, BadFieldsAreInvalidArgumentNamingTheField) {
  struct Case {
    std::string field;
    std::function<void(v1::ChatRequest*)> edit;
  };
  const std::vector<Case> cases = {
      {"tools[0].function.parameters_json",
       [](v1::ChatRequest* r) {
         r->mutable_tools(0)->mutable_function()->set_parameters_json("{\"type\": ");
       }},
      {"tools[1].function.parameters_json",
       [](v1::ChatRequest* r) {
         r->mutable_tools(1)->mutable_function()->set_parameters_json("[1, 2]");
       }},
      {"'tools[1].type'", [](v1::ChatRequest* r) { r->mutable_tools(1)->set_type("retrieval"); }},
      {"'tools[0].function.name'",
       [](v1::ChatRequest* r) { r->mutable_tools(0)->mutable_function()->set_name(""); }},
      {"tool_choice_function", [](v1::ChatRequest* r) { r->set_tool_choice_function("other"); }},
      {"tool_choice_function", [](v1::ChatRequest* r) { r->set_tool_choice("function"); }},
      {"tool_choice", [](v1::ChatRequest* r) { r->set_tool_choice("sometimes"); }},
      {"tool_choice",
       [](v1::ChatRequest* r) {
         r->set_tool_choice("auto");
         r->set_tool_choice_function("ping");
       }},
      {"'tool_choice'",
       [](v1::ChatRequest* r) {
         r->clear_tools();
         r->set_tool_choice("required");
       }},
      {"chat_template_kwargs_json",
       [](v1::ChatRequest* r) { r->set_chat_template_kwargs_json("enable_thinking"); }},
      {"chat_template_kwargs_json",
       [](v1::ChatRequest* r) { r->set_chat_template_kwargs_json("\"x\""); }},
      {"messages[1].tool_calls[0].function.arguments",
       [](v1::ChatRequest* r) {
         r->mutable_messages(1)->mutable_tool_calls(0)->mutable_function()->set_arguments(
             "{\"city\": Oslo}");
       }},
      {"messages[1].tool_calls[0].function.arguments",
       [](v1::ChatRequest* r) {
         r->mutable_messages(1)->mutable_tool_calls(0)->mutable_function()->set_arguments("7");
       }},
      {"messages[1].tool_calls[0].function.name",
       [](v1::ChatRequest* r) {
         r->mutable_messages(1)->mutable_tool_calls(0)->mutable_function()->set_name("");
       }},
      {"messages[1].tool_calls[0].type",
       [](v1::ChatRequest* r) { r->mutable_messages(1)->mutable_tool_calls(0)->set_type("x"); }},
      {"messages[0].tool_calls",
       [](v1::ChatRequest* r) {
         *r->mutable_messages(0)->add_tool_calls() = r->messages(1).tool_calls(0);
       }},
      {"messages[0].tool_call_id",
       [](v1::ChatRequest* r) { r->mutable_messages(0)->set_tool_call_id("call_1"); }},
      {"messages[2].reasoning_content",
       [](v1::ChatRequest* r) { r->mutable_messages(2)->set_reasoning_content("hmm"); }},
      {"messages[2].role", [](v1::ChatRequest* r) { r->mutable_messages(2)->set_role("robot"); }},
  };
  for (const Case& c : cases) {
    v1::ChatRequest r = ConversationWithResult();
    c.edit(&r);
    absl::StatusOr<ChatInput> in = ToChatInput(r);
    ASSERT_FALSE(in.ok()) << c.field;
    EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(in.status().message()), StartsWith(c.field)) << in.status();
  }
}

TEST(GrpcChatInputTest, InvalidJsonIsReportedByPositionNotQuoted) {
  v1::ChatRequest r = WeatherChat();
  r.mutable_tools(0)->mutable_function()->set_parameters_json("{\"a\": " +
                                                              std::string(100000, 'x'));
  absl::StatusOr<ChatInput> in = ToChatInput(r);
  ASSERT_FALSE(in.ok());
  EXPECT_THAT(std::string(in.status().message()), HasSubstr("syntax error at byte"));
  EXPECT_LT(in.status().message().size(), 200u);
}

serving::ChatOutputSettings Hermes() {
  serving::ChatOutputSettings s;
  s.tool_call_format = "hermes";
  s.parse_reasoning = true;
  return s;
}

TEST(GrpcPrepareChatTest, AForcedCallIsDecodedUnderAGrammarUnlessStructuredOutputIsSet) {
  ScriptedEngine engine;
  v1::ChatRequest r = WeatherChat();
  absl::StatusOr<PreparedCall> free = PrepareChat(r, engine, Hermes());
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_EQ(free->request.grammar, "");
  ASSERT_TRUE(free->output.has_value());
  EXPECT_EQ(free->output->format, "hermes");
  EXPECT_TRUE(free->output->parse_reasoning);

  r.set_tool_choice_function("get_weather");
  absl::StatusOr<PreparedCall> forced = PrepareChat(r, engine, Hermes());
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_THAT(forced->request.grammar, HasSubstr("get_weather"));
  EXPECT_THAT(forced->request.grammar, Not(HasSubstr("ping")));

  r.mutable_options()->mutable_structured_output()->set_json_object(true);
  absl::StatusOr<PreparedCall> both = PrepareChat(r, engine, Hermes());
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(std::string(both.status().message()), StartsWith("tool_choice: "));
  EXPECT_THAT(std::string(both.status().message()),
              HasSubstr("options.structured_output.json_object"));

  // No tool-call format (the daemon's parser is none): a call cannot be forced.
  r.mutable_options()->clear_structured_output();
  serving::ChatOutputSettings none;
  absl::StatusOr<PreparedCall> unformatted = PrepareChat(r, engine, none);
  ASSERT_FALSE(unformatted.ok());
  EXPECT_THAT(std::string(unformatted.status().message()), HasSubstr("tool_choice"));
}

// What the parser splits: events fed to a ChunkBuilder one by one (as the engine sends them).
serving::GenerateEvent Event(const std::string& text, int tokens, bool finished = false) {
  serving::GenerateEvent e;
  e.text = text;
  for (int i = 0; i < tokens; ++i) e.token_ids.push_back('a');
  if (finished) {
    e.finished = true;
    e.finish_reason = "stop";
    e.usage.prompt_tokens = 5;
    e.usage.completion_tokens = 10;
  }
  return e;
}

TEST(GrpcChunkBuilderTest, ReasoningContentAndCallsGoToTheirFields) {
  ScriptedEngine engine;
  chat::ChatOutputOptions o;
  o.format = "hermes";
  o.parse_reasoning = true;
  o.starts_in_reasoning = true;  // the prompt opened <think>
  ChunkBuilder builder(o);
  std::vector<v1::GenerateResponse> chunks(4);
  builder.Append(Event("Let me ", 2), engine, &chunks[0]);
  builder.Append(Event("think.</th", 2), engine, &chunks[1]);
  builder.Append(Event("ink>Calling.<tool_call>\n{\"name\": \"ping\", ", 3), engine, &chunks[2]);
  builder.Append(Event("\"arguments\": {}}\n</tool_call>", 3, true), engine, &chunks[3]);
  std::string reasoning, text;
  for (const auto& c : chunks) {
    reasoning += c.reasoning_content();
    text += c.text();
  }
  EXPECT_EQ(reasoning, "Let me think.");
  EXPECT_EQ(text, "Calling.");
  EXPECT_EQ(chunks[0].reasoning_content(), "Let me");  // the trailing space waits
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(chunks[i].tool_calls().empty()) << i;
  ASSERT_EQ(chunks[3].tool_calls_size(), 1);
  const v1::ToolCallDelta& call = chunks[3].tool_calls(0);
  EXPECT_EQ(call.index(), 0);
  EXPECT_EQ(call.name(), "ping");
  EXPECT_EQ(ojson::parse(call.arguments()), ojson::object());
  EXPECT_THAT(call.id(), StartsWith("call_"));
  EXPECT_EQ(chunks[3].finish_reason(), "tool_calls");
  // Tokens read inside the reasoning, the one that closed it included: 2 + 2 + 3.
  EXPECT_EQ(chunks[3].usage().reasoning_tokens(), 7);
  EXPECT_EQ(chunks[3].usage().completion_tokens(), 10);
  int ids = 0;
  for (const auto& c : chunks) ids += c.token_ids_size();
  EXPECT_EQ(ids, 10);
}

TEST(GrpcChunkBuilderTest, WithoutOutputOptionsTheTextIsUntouched) {
  ScriptedEngine engine;
  ChunkBuilder builder(std::nullopt);
  v1::GenerateResponse chunk;
  builder.Append(Event("<think>x</think><tool_call>{}</tool_call>", 3, true), engine, &chunk);
  EXPECT_EQ(chunk.text(), "<think>x</think><tool_call>{}</tool_call>");
  EXPECT_EQ(chunk.reasoning_content(), "");
  EXPECT_EQ(chunk.finish_reason(), "stop");
  EXPECT_EQ(chunk.usage().reasoning_tokens(), 0);

  // A length cut keeps its reason even after a call.
  chat::ChatOutputOptions o;
  o.format = "hermes";
  ChunkBuilder cut(o);
  serving::GenerateEvent e =
      Event("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>", 3, true);
  e.finish_reason = "length";
  v1::GenerateResponse last;
  cut.Append(e, engine, &last);
  EXPECT_EQ(last.tool_calls_size(), 1);
  EXPECT_EQ(last.finish_reason(), "length");
}

// A forced call streams its arguments in pieces (ChatOutputOptions::stream_arguments): the
// first piece names the call, later ones of its index carry more arguments; pieces that land
// in one chunk (a slow reader) are one entry.
TEST(GrpcChunkBuilderTest, StreamedArgumentsAssembleByIndexAndJoinWithinAChunk) {
  ScriptedEngine engine;
  chat::ChatOutputOptions o;
  o.format = "hermes";
  o.stream_arguments = true;
  const std::vector<std::string> pieces = {"<tool_call>\n{\"name\": \"get_weather\", ",
                                           "\"arguments\": {\"city\": \"Pa", "ris\", \"unit\"",
                                           ": \"c\"}}\n</tool_call>"};
  ChunkBuilder separate(o);
  std::vector<v1::GenerateResponse> chunks(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    separate.Append(Event(pieces[i], 1, i + 1 == pieces.size()), engine, &chunks[i]);
  }
  std::string arguments, id;
  int entries = 0;
  for (const auto& c : chunks) {
    for (const v1::ToolCallDelta& d : c.tool_calls()) {
      EXPECT_EQ(d.index(), 0);
      if (entries++ == 0) {
        EXPECT_EQ(d.name(), "get_weather");
        id = d.id();
      } else {
        EXPECT_EQ(d.name(), "");
        EXPECT_EQ(d.id(), "");
      }
      arguments += d.arguments();
    }
  }
  EXPECT_GT(entries, 1);  // streamed, not whole at the end
  EXPECT_THAT(id, StartsWith("call_"));
  EXPECT_EQ(ojson::parse(arguments), ojson({{"city", "Paris"}, {"unit", "c"}}));
  EXPECT_EQ(chunks.back().finish_reason(), "tool_calls");

  ChunkBuilder joined(o);
  v1::GenerateResponse one;
  for (size_t i = 0; i < pieces.size(); ++i) {
    joined.Append(Event(pieces[i], 1, i + 1 == pieces.size()), engine, &one);
  }
  ASSERT_EQ(one.tool_calls_size(), 1);
  EXPECT_EQ(one.tool_calls(0).name(), "get_weather");
  EXPECT_EQ(ojson::parse(one.tool_calls(0).arguments()), ojson({{"city", "Paris"}, {"unit", "c"}}));
}

// Through the server: the echo engine returns the rendered prompt, so a user message holding
// call markup comes back as a model's call would.
TEST(GrpcChatServerTest, ChunksCarryToolCallsAndFinishWithToolCalls) {
  ScriptedEngine engine;
  GrpcServerOptions options;
  options.port = 0;
  options.chat_output = Hermes();
  absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Start(&engine, options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Inference::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));

  auto chat = [&](const v1::ChatRequest& r, grpc::Status* status) {
    grpc::ClientContext context;
    std::vector<v1::GenerateResponse> chunks;
    auto reader = stub->Chat(&context, r);
    v1::GenerateResponse chunk;
    while (reader->Read(&chunk)) chunks.push_back(chunk);
    *status = reader->Finish();
    return chunks;
  };
  v1::ChatRequest r = WeatherChat();
  r.mutable_messages(0)->set_content(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>");
  grpc::Status status;
  std::vector<v1::GenerateResponse> chunks = chat(r, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_FALSE(chunks.empty());
  std::string text;
  std::vector<v1::ToolCallDelta> calls;
  for (const auto& c : chunks) {
    text += c.text();
    calls.insert(calls.end(), c.tool_calls().begin(), c.tool_calls().end());
  }
  EXPECT_EQ(text.find("<tool_call>"), std::string::npos) << text;
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name(), "get_weather");
  EXPECT_EQ(ojson::parse(calls[0].arguments()), ojson({{"city", "Paris"}}));
  EXPECT_EQ(chunks.back().finish_reason(), "tool_calls");

  // tool_choice "none": the markup stays text.
  r.set_tool_choice("none");
  chunks = chat(r, &status);
  ASSERT_TRUE(status.ok());
  text.clear();
  for (const auto& c : chunks) {
    text += c.text();
    EXPECT_TRUE(c.tool_calls().empty());
  }
  EXPECT_NE(text.find("<tool_call>"), std::string::npos) << text;
  EXPECT_EQ(chunks.back().finish_reason(), "stop");

  // Errors reach the client as INVALID_ARGUMENT with the field's name.
  r.set_tool_choice("");
  r.set_tool_choice_function("nope");
  chunks = chat(r, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), StartsWith("tool_choice_function: "));
  EXPECT_TRUE(chunks.empty());
}

}  // namespace
}  // namespace tessera::grpc_api
