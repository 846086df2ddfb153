// Engine events to tessera.v1.GenerateResponse chunks.
#pragma once

#include <cstdint>
#include <optional>

#include "common/chat/tool_calls.h"
#include "controller/serving/engine.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::grpc_api {

// Appends `event`'s tokens, text and logprobs to `chunk`, and on the finished event sets
// finish_reason and usage. Appending several events to one chunk gives the chunk a slow
// reader should receive (the concatenation). All text is made valid UTF-8; token texts come
// from engine.TokenText.
void AppendEvent(const serving::GenerateEvent& event, const serving::Engine& engine,
                 tessera::v1::GenerateResponse* chunk);

// True when `chunk` carries nothing a client would see (no tokens, text, reasoning, tool
// calls or finish).
bool IsEmptyChunk(const tessera::v1::GenerateResponse& chunk);

// The events of one call into its chunks. Without `output` (Generate, or a Chat whose output
// is not parsed) this is AppendEvent. With it, the event text goes through a
// chat::ChatOutputParser as the REST chat API's does: content into `text`, reasoning into
// reasoning_content, calls into tool_calls as the parser sends them (whole, or for a forced
// call its arguments as they are read; pieces of one call that land in the same chunk are
// joined). Text that may still be markup is held back until a later event, or the finished
// one, decides it. The finished event's finish_reason is "tool_calls" when calls were
// returned and the engine said "stop"; with reasoning parsing on, usage.reasoning_tokens
// counts the tokens whose text was read inside the reasoning (or closed it). An unknown
// format name in `output` leaves the text unparsed.
class ChunkBuilder {
 public:
  explicit ChunkBuilder(std::optional<chat::ChatOutputOptions> output);

  // As AppendEvent, for the call's next event (events in order, each once).
  void Append(const serving::GenerateEvent& event, const serving::Engine& engine,
              tessera::v1::GenerateResponse* chunk);

 private:
  std::optional<chat::ChatOutputParser> parser_;
  bool count_reasoning_ = false;
  bool tool_called_ = false;
  int64_t reasoning_tokens_ = 0;
};

}  // namespace tessera::grpc_api
