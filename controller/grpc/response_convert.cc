#include "controller/grpc/response_convert.h"

#include <algorithm>
#include <utility>

#include "controller/grpc/utf8_text.h"

namespace tessera::grpc_api {
namespace {

template <typename Proto>
void SetTokenFields(int32_t token, float logprob, const serving::Engine& engine, Proto* out) {
  const std::string text = engine.TokenText(token);
  out->set_token(token);
  out->set_text(ToValidUtf8(text));
  out->set_bytes(text);
  out->set_logprob(logprob);
}

void AppendTokens(const serving::GenerateEvent& event, const serving::Engine& engine,
                  tessera::v1::GenerateResponse* chunk) {
  for (int32_t id : event.token_ids) chunk->add_token_ids(id);
  for (const serving::TokenLogprobs& lp : event.logprobs) {
    tessera::v1::TokenLogprob* out = chunk->add_logprobs();
    SetTokenFields(lp.token, lp.logprob, engine, out);
    for (const auto& [token, logprob] : lp.top) {
      SetTokenFields(token, logprob, engine, out->add_top_logprobs());
    }
  }
}

// The finished event's finish_reason and usage.
void SetFinish(const serving::GenerateEvent& event, tessera::v1::GenerateResponse* chunk) {
  chunk->set_finish_reason(event.finish_reason.empty() ? "stop" : event.finish_reason);
  tessera::v1::Usage* usage = chunk->mutable_usage();
  usage->set_prompt_tokens(event.usage.prompt_tokens);
  usage->set_completion_tokens(event.usage.completion_tokens);
  usage->set_total_tokens(event.usage.prompt_tokens + event.usage.completion_tokens);
  usage->set_cached_tokens(event.usage.cached_tokens);
}

void AppendDelta(chat::ChatOutputDelta delta, tessera::v1::GenerateResponse* chunk) {
  chunk->mutable_text()->append(ToValidUtf8(delta.content));
  chunk->mutable_reasoning_content()->append(ToValidUtf8(delta.reasoning_content));
  for (chat::ToolCallDelta& call : delta.tool_calls) {
    auto& calls = *chunk->mutable_tool_calls();
    if (!calls.empty() && calls.rbegin()->index() == call.index && call.id.empty() &&
        call.name.empty()) {
      // More arguments of the call this chunk already holds a piece of: one piece.
      calls.rbegin()->mutable_arguments()->append(ToValidUtf8(call.arguments));
      continue;
    }
    tessera::v1::ToolCallDelta* out = chunk->add_tool_calls();
    out->set_index(call.index);
    out->set_id(ToValidUtf8(call.id));
    out->set_name(ToValidUtf8(call.name));
    out->set_arguments(ToValidUtf8(call.arguments));
  }
}

}  // namespace

void AppendEvent(const serving::GenerateEvent& event, const serving::Engine& engine,
                 tessera::v1::GenerateResponse* chunk) {
  AppendTokens(event, engine, chunk);
  chunk->mutable_text()->append(ToValidUtf8(event.text));
  if (event.finished) SetFinish(event, chunk);
}

bool IsEmptyChunk(const tessera::v1::GenerateResponse& chunk) {
  return chunk.token_ids().empty() && chunk.text().empty() && chunk.logprobs().empty() &&
         chunk.reasoning_content().empty() && chunk.tool_calls().empty() &&
         chunk.finish_reason().empty();
}

ChunkBuilder::ChunkBuilder(std::optional<chat::ChatOutputOptions> output) {
  if (!output.has_value()) return;
  count_reasoning_ = output->parse_reasoning;
  absl::StatusOr<chat::ChatOutputParser> parser = chat::ChatOutputParser::Create(*output);
  if (parser.ok()) parser_.emplace(*std::move(parser));
}

void ChunkBuilder::Append(const serving::GenerateEvent& event, const serving::Engine& engine,
                          tessera::v1::GenerateResponse* chunk) {
  if (!parser_.has_value()) return AppendEvent(event, engine, chunk);
  AppendTokens(event, engine, chunk);
  // A token counts as reasoning when its text is read inside the reasoning (or closes it).
  const bool was_reasoning = parser_->in_reasoning();
  chat::ChatOutputDelta delta = parser_->Feed(event.text);
  if (was_reasoning || parser_->in_reasoning()) {
    reasoning_tokens_ += static_cast<int64_t>(event.token_ids.size());
  }
  if (event.finished) {
    chat::ChatOutputDelta rest = parser_->Finish();
    delta.reasoning_content += rest.reasoning_content;
    delta.content += rest.content;
    for (chat::ToolCallDelta& c : rest.tool_calls) delta.tool_calls.push_back(std::move(c));
  }
  tool_called_ = tool_called_ || !delta.tool_calls.empty();
  AppendDelta(std::move(delta), chunk);
  if (!event.finished) return;
  SetFinish(event, chunk);
  if (tool_called_ && chunk->finish_reason() == "stop") chunk->set_finish_reason("tool_calls");
  if (count_reasoning_) {
    chunk->mutable_usage()->set_reasoning_tokens(
        static_cast<int32_t>(std::min<int64_t>(reasoning_tokens_, event.usage.completion_tokens)));
  }
}

}  // namespace tessera::grpc_api
