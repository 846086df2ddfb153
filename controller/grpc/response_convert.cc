#include "controller/grpc/response_convert.h"

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

}  // namespace

void AppendEvent(const serving::GenerateEvent& event, const serving::Engine& engine,
                 tessera::v1::GenerateResponse* chunk) {
  for (int32_t id : event.token_ids) chunk->add_token_ids(id);
  chunk->mutable_text()->append(ToValidUtf8(event.text));
  for (const serving::TokenLogprobs& lp : event.logprobs) {
    tessera::v1::TokenLogprob* out = chunk->add_logprobs();
    SetTokenFields(lp.token, lp.logprob, engine, out);
    for (const auto& [token, logprob] : lp.top) {
      SetTokenFields(token, logprob, engine, out->add_top_logprobs());
    }
  }
  if (event.finished) {
    chunk->set_finish_reason(event.finish_reason.empty() ? "stop" : event.finish_reason);
    tessera::v1::Usage* usage = chunk->mutable_usage();
    usage->set_prompt_tokens(event.usage.prompt_tokens);
    usage->set_completion_tokens(event.usage.completion_tokens);
    usage->set_total_tokens(event.usage.prompt_tokens + event.usage.completion_tokens);
    usage->set_cached_tokens(event.usage.cached_tokens);
  }
}

bool IsEmptyChunk(const tessera::v1::GenerateResponse& chunk) {
  return chunk.token_ids().empty() && chunk.text().empty() && chunk.logprobs().empty() &&
         chunk.finish_reason().empty();
}

}  // namespace tessera::grpc_api
