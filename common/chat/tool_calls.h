// Tool calls and reasoning in a model's output: splits the text a chat model generates into
// reasoning (`<think>…</think>`), content, and tool calls written in the markup of the model's
// chat template, as OpenAI's chat API returns them (message.reasoning_content,
// message.content, message.tool_calls).
//
//   ChatOutputOptions opts;
//   opts.format = DetectToolCallFormat(template_source);     // once per model
//   opts.tools = request["tools"];                            // glm45 types values by schema
//   opts.starts_in_reasoning = PromptEndsInReasoning(prompt); // "<|assistant|><think>"
//   auto parser = ChatOutputParser::Create(opts);             // per request
//   for (piece : detokenized) send(parser->Feed(piece));      // streaming deltas
//   send(parser->Finish());
//
// or, for a whole message, ParseChatOutput(text, opts).
//
// Formats (by name):
//   glm45         GLM-4.5/4.6/4.7/5: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>
//                 …</tool_call>; a value whose parameter is a "string" in the tool's schema stays
//                 a string, others are parsed as JSON (the string when that fails).
//   deepseek_v31  DeepSeek-V3.1:
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name<｜tool▁sep｜>{args}
//                 <｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
//   deepseek_v3   DeepSeek-V3 / R1: the same markers, each call
//                 <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{args}\n```<｜tool▁call▁end｜>
//   hermes        Qwen2.5/Qwen3: <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>
//   llama3_json   Llama 3.1: the whole message is {"name": …, "parameters": {…}}, possibly after
//                 <|python_tag|>
//   mistral       [TOOL_CALLS][{"name": …, "arguments": {…}, "id": …}, …]
//   none          no tool-call parsing (reasoning is still split when enabled)
//
// The parser never fails on model output: a call it cannot read is returned as content,
// markup included. Whitespace around reasoning and content (the newlines templates put
// around <think>, </think> and calls) is trimmed.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::chat {

// The format names ChatOutputOptions::format accepts, "none" included.
const std::vector<std::string>& ToolCallFormats();

// The tool-call format a chat template writes, found from markers distinctive of each format
// in its source (as llama-server detects it); "none" when no format is recognized.
std::string DetectToolCallFormat(std::string_view template_source);

// True when `prompt` (a rendered prompt with its generation prompt) ends inside an open
// <think> block, as GLM-4.7's "<|assistant|><think>" does: the model's output then starts
// with reasoning.
bool PromptEndsInReasoning(std::string_view prompt);

struct ChatOutputOptions {
  std::string format = "none";
  // The request's OpenAI `tools` array (or null): glm45 types argument values by the
  // parameters' JSON schemas.
  nlohmann::ordered_json tools;
  // Split <think>…</think> at the start of the output into reasoning.
  bool parse_reasoning = true;
  // The prompt already opened <think>: the output starts as reasoning, until </think>.
  bool starts_in_reasoning = false;
  // At most this many calls are returned (0: any number); later ones are dropped
  // (OpenAI's parallel_tool_calls: false is 1).
  int max_calls = 0;
  // Streaming: send a call's arguments in pieces as they are read (glm45: one argument at a
  // time; hermes and deepseek_v31: the arguments' JSON text as it comes) instead of whole at
  // its end. For calls decoded under a grammar (valid by construction): a call that turned
  // out malformed after its first piece could no longer become content. Other formats, and
  // ParseChatOutput, always send whole calls.
  bool stream_arguments = false;
};

struct ToolCall {
  std::string id;  // "call_…" (mistral: the model's id, or 9 alphanumerics)
  std::string name;
  std::string arguments;  // a JSON object, serialized
};

struct ParsedChatOutput {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;
};

// A piece of a tool call in a streamed delta. The first delta of a call carries its id and
// name; arguments are appended across deltas of the same index. Without
// ChatOutputOptions::stream_arguments the parser sends each call whole, in one delta, once its
// end marker is seen: until then it may still turn out to be malformed, and then it is
// content.
struct ToolCallDelta {
  int index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChatOutputDelta {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
};

// The incremental parser: fed the output as it is detokenized, it returns what can be told
// apart so far. Text that could still turn out to be (part of) markup is held back, and
// nothing else: a marker split across pieces never reaches content. Deltas never end inside
// a UTF-8 sequence. Feeding a text whole or in any pieces gives the same concatenation.
namespace tool_calls_internal {
// How far the end of a call has been looked for (ChatOutputParser's incremental scans).
struct JsonScan {
  size_t pos = 0;
  int depth = 0;
  bool in_string = false;
  bool escape = false;
};
}  // namespace tool_calls_internal

class ChatOutputParser {
 public:
  // InvalidArgument for an unknown format name.
  static absl::StatusOr<ChatOutputParser> Create(ChatOutputOptions options);

  ChatOutputDelta Feed(std::string_view piece);
  // Inside reasoning: what was fed last ended there (or the prompt opened it and nothing
  // has closed it yet). A token whose text is fed while this holds before or after counts
  // as a reasoning token.
  bool in_reasoning() const { return state_ == State::kReasoning; }
  // The output is complete: everything held back is resolved and returned.
  ChatOutputDelta Finish();

 private:
  enum class State { kStart, kReasoning, kContent, kCall, kHoldAll, kDone };
  // Trims whitespace at the start and end of one output channel (reasoning or content)
  // while streaming: leading whitespace is dropped, trailing whitespace held until more text
  // follows it.
  struct Channel {
    bool started = false;
    std::string pending_ws;
  };

  explicit ChatOutputParser(ChatOutputOptions options);

  void Process(bool final, ChatOutputDelta* out);
  // One step; false when nothing more can be done without more input.
  bool Step(bool final, ChatOutputDelta* out);
  void Emit(Channel* channel, std::string_view text, std::string* out);
  void EmitCall(std::string name, std::string arguments, std::string id, ChatOutputDelta* out);
  // Resolves a call whose body (between its start marker and end marker, or to the end of
  // output) is `body`: a tool call, or, when malformed, content.
  void ResolveCall(std::string_view body, bool closed, ChatOutputDelta* out);
  // stream_arguments: sends what `body` (the call read so far, or whole when `closed`) adds
  // to the call's deltas; false when the format does not stream (then ResolveCall does).
  bool StreamCall(std::string_view body, bool closed, ChatOutputDelta* out);
  std::string NewId();

  ChatOutputOptions options_;
  State state_ = State::kStart;
  std::string buffer_;
  Channel reasoning_;
  Channel content_;
  // The start and end marker of the call being read (kCall, kHoldAll).
  std::string call_start_;
  std::string call_end_;
  tool_calls_internal::JsonScan scan_;
  int next_index_ = 0;
  // The call being streamed (stream_arguments): its index (-1 before its first delta) and
  // the arguments text sent so far.
  int streaming_index_ = -1;
  std::string streamed_arguments_;
  std::mt19937_64 rng_;
};

// Parses a whole output: the same as one Feed and Finish, assembled.
absl::StatusOr<ParsedChatOutput> ParseChatOutput(std::string_view text,
                                                 const ChatOutputOptions& options);

}  // namespace tessera::chat
