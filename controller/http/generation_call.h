// One OpenAI completion request in flight: submits its `n` engine requests, turns their
// events into either one response body or a stream of server-sent events, and cancels the
// engine requests when the client goes away.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "controller/http/http_server.h"
#include "controller/http/openai_request.h"
#include "controller/http/openai_response.h"
#include "controller/serving/engine.h"

namespace tessera::http {

// Submits `prompt` (already tokenized) with `params` and answers on `exchange`; returns at
// once (the answer is written as the engine's events arrive). Errors before the first
// event (the engine refused the request) are answered as HTTP errors; errors after a
// stream began are a `data: {"error": ...}` event, then the connection closes. `engine`
// must outlive the request. Chat with `output` set: each choice's text is split into
// reasoning, content and tool calls (message.reasoning_content / content / tool_calls,
// streamed as delta.*), finish_reason "tool_calls" when calls were made.
void StartGeneration(serving::Engine* engine, const CompletionParams& params,
                     std::vector<int32_t> prompt, ResponseHeader header,
                     std::shared_ptr<Exchange> exchange,
                     std::optional<chat::ChatOutputOptions> output = std::nullopt);

}  // namespace tessera::http
