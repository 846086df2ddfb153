// Engine events to tessera.v1.GenerateResponse chunks.
#pragma once

#include "controller/serving/engine.h"
#include "tessera/v1/inference.pb.h"

namespace tessera::grpc_api {

// Appends `event`'s tokens, text and logprobs to `chunk`, and on the finished event sets
// finish_reason and usage. Appending several events to one chunk gives the chunk a slow
// reader should receive (the concatenation). All text is made valid UTF-8; token texts come
// from engine.TokenText.
void AppendEvent(const serving::GenerateEvent& event, const serving::Engine& engine,
                 tessera::v1::GenerateResponse* chunk);

// True when `chunk` carries nothing a client would see (no tokens, text or finish).
bool IsEmptyChunk(const tessera::v1::GenerateResponse& chunk);

}  // namespace tessera::grpc_api
