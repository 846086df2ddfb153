#include "controller/http/generation_call.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "controller/http/openai_errors.h"

namespace tessera::http {
namespace {

using nlohmann::json;

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  GenerationCall(serving::Engine* engine, const CompletionParams& params, ResponseHeader header,
                 std::shared_ptr<Exchange> exchange, int32_t prompt_tokens,
                 std::optional<chat::ChatOutputOptions> output)
      : engine_(engine),
        chat_(params.endpoint == Endpoint::kChatCompletions),
        stream_(params.stream),
        include_usage_(params.include_usage),
        top_logprobs_(params.top_logprobs),
        logprobs_(params.logprobs),
        header_(std::move(header)),
        exchange_(std::move(exchange)),
        prompt_tokens_(prompt_tokens) {
    for (int i = 0; i < params.n; ++i) choices_.emplace_back(params.top_logprobs);
    remaining_ = params.n;
    if (chat_ && output.has_value()) {
      for (Choice& c : choices_) {
        absl::StatusOr<chat::ChatOutputParser> parser = chat::ChatOutputParser::Create(*output);
        if (parser.ok()) c.parser.emplace(*std::move(parser));
      }
      output_ = std::move(output);
    }
  }

  void Start(const CompletionParams& params, std::vector<int32_t> prompt);

 private:
  struct Choice {
    explicit Choice(int32_t top) : completion_logprobs(top) {}
    std::string text;
    std::string finish_reason;
    bool started = false;
    bool finished = false;
    bool tool_called = false;
    // Chat with output parsing: the incremental parser of this choice's text (its deltas
    // are streamed; it also counts the reasoning tokens).
    std::optional<chat::ChatOutputParser> parser;
    int32_t completion_tokens = 0;
    int32_t reasoning_tokens = 0;
    json chat_logprobs = json::array();
    CompletionLogprobs completion_logprobs;
  };

  void OnEvent(int index, serving::GenerateEvent event);
  // Called with mu_ held.
  void CancelUnfinished();
  // Called with mu_ held.
  void HandleEvent(int index, serving::GenerateEvent event);
  void StreamEvent(int index, const serving::GenerateEvent& event,
                   const chat::ChatOutputDelta& delta);
  void Fail(const absl::Status& status);
  void Finish();
  json Chunk() const;
  json ChunkChoice(int index) const;
  json LogprobsOf(int index, const serving::GenerateEvent& event);

  serving::Engine* engine_;
  const bool chat_;
  const bool stream_;
  const bool include_usage_;
  const int32_t top_logprobs_;
  const bool logprobs_;
  const ResponseHeader header_;
  const std::shared_ptr<Exchange> exchange_;
  int32_t prompt_tokens_;
  int32_t cached_tokens_ = 0;
  std::optional<chat::ChatOutputOptions> output_;

  std::mutex mu_;
  std::vector<Choice> choices_;
  int remaining_ = 0;
  bool done_ = false;       // answered (or failed); later events are dropped
  bool submitted_ = false;  // every request submitted; events before that wait in pending_
  std::vector<std::pair<int, serving::GenerateEvent>> pending_;
  std::vector<std::shared_ptr<serving::RequestHandle>> handles_;
};

void GenerationCall::Start(const CompletionParams& params, std::vector<int32_t> prompt) {
  std::vector<std::shared_ptr<serving::RequestHandle>> handles;
  for (int i = 0; i < params.n; ++i) {
    serving::GenerateRequest request;
    request.request_id = params.n == 1 ? header_.id : absl::StrCat(header_.id, "-", i);
    request.prompt_tokens = prompt;
    request.sampling = params.sampling;
    // Choices of one request differ: each gets its own seed when one was given.
    if (request.sampling.seed.has_value()) *request.sampling.seed += static_cast<uint64_t>(i);
    request.max_tokens = params.max_tokens;
    request.stop = params.stop;
    request.ignore_eos = params.ignore_eos;
    request.logprobs = params.logprobs;
    request.top_logprobs = params.top_logprobs;
    request.cache_salt = params.cache_salt;
    request.grammar = params.grammar;
    absl::StatusOr<std::unique_ptr<serving::RequestHandle>> handle = engine_->Submit(
        std::move(request), [self = shared_from_this(), i](serving::GenerateEvent event) {
          self->OnEvent(i, std::move(event));
        });
    if (!handle.ok()) {
      for (auto& h : handles) h->Cancel();
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      pending_.clear();
      exchange_->Respond(ErrorResponse(ApiErrorFromStatus(handle.status())));
      return;
    }
    handles.push_back(std::move(*handle));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    handles_ = handles;
    submitted_ = true;
    if (stream_) {
      exchange_->BeginStream(200, "text/event-stream; charset=utf-8",
                             {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
    }
    // Events that came before every request was submitted (and the stream begun).
    std::vector<std::pair<int, serving::GenerateEvent>> pending = std::move(pending_);
    pending_.clear();
    for (auto& [index, event] : pending) HandleEvent(index, std::move(event));
  }
  // Holds the handles (not the call): the call may be gone when the client leaves.
  exchange_->OnDisconnect([handles = std::move(handles)] {
    for (auto& h : handles) h->Cancel();
  });
}

void GenerationCall::CancelUnfinished() {
  for (size_t i = 0; i < handles_.size(); ++i) {
    if (!choices_[i].finished) handles_[i]->Cancel();
  }
}

json GenerationCall::Chunk() const {
  json chunk = ResponseObject(header_);
  if (include_usage_) chunk["usage"] = nullptr;
  return chunk;
}

json GenerationCall::LogprobsOf(int index, const serving::GenerateEvent& event) {
  if (!logprobs_ || event.logprobs.empty()) return nullptr;
  if (chat_) {
    return {{"content", ChatLogprobEntries(event.logprobs, top_logprobs_, *engine_)},
            {"refusal", nullptr}};
  }
  CompletionLogprobs& lp = choices_[index].completion_logprobs;
  lp.ClearKeepingOffset();
  lp.Append(event.logprobs, *engine_);
  return lp.ToJson();
}

void GenerationCall::StreamEvent(int index, const serving::GenerateEvent& event,
                                 const chat::ChatOutputDelta& delta) {
  Choice& choice = choices_[index];
  auto send = [this](json choice_json) {
    json chunk = Chunk();
    chunk["choices"].push_back(std::move(choice_json));
    exchange_->Write(absl::StrCat("data: ", DumpJson(chunk), "\n\n"));
  };
  if (chat_ && !choice.started) {
    // OpenAI's first chunk of a choice carries the role and an empty content.
    send({{"index", index},
          {"delta", {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}},
          {"logprobs", nullptr},
          {"finish_reason", nullptr}});
  }
  choice.started = true;
  if (chat_ && choice.parser.has_value()) {
    if (!delta.tool_calls.empty()) choice.tool_called = true;
    if (!delta.empty() || (logprobs_ && !event.logprobs.empty())) {
      send({{"index", index},
            {"delta", ChatDeltaJson(delta)},
            {"logprobs", LogprobsOf(index, event)},
            {"finish_reason", nullptr}});
    }
  } else if (!event.text.empty() || (logprobs_ && !event.logprobs.empty())) {
    json logprobs = LogprobsOf(index, event);
    if (chat_) {
      send({{"index", index},
            {"delta", {{"content", event.text}}},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", nullptr}});
    } else {
      send({{"index", index},
            {"text", event.text},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", nullptr}});
    }
  }
  if (event.finished && event.status.ok()) {
    if (chat_) {
      send({{"index", index},
            {"delta", json::object()},
            {"logprobs", nullptr},
            {"finish_reason", choice.tool_called && choice.finish_reason == "stop"
                                  ? std::string("tool_calls")
                                  : choice.finish_reason}});
    } else {
      send({{"index", index},
            {"text", ""},
            {"logprobs", nullptr},
            {"finish_reason", choice.finish_reason}});
    }
  }
}

void GenerationCall::OnEvent(int index, serving::GenerateEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!submitted_) {
    pending_.emplace_back(index, std::move(event));
    return;
  }
  HandleEvent(index, std::move(event));
}

void GenerationCall::HandleEvent(int index, serving::GenerateEvent event) {
  if (done_) return;
  Choice& choice = choices_[index];
  if (choice.finished) return;
  choice.text += event.text;
  choice.completion_tokens += static_cast<int32_t>(event.token_ids.size());
  chat::ChatOutputDelta delta;
  if (choice.parser.has_value()) {
    // A token counts as reasoning when its text is read inside the reasoning (or closes it).
    const bool was_reasoning = choice.parser->in_reasoning();
    delta = choice.parser->Feed(event.text);
    if (was_reasoning || choice.parser->in_reasoning()) {
      choice.reasoning_tokens += static_cast<int32_t>(event.token_ids.size());
    }
    if (event.finished) {
      chat::ChatOutputDelta rest = choice.parser->Finish();
      delta.reasoning_content += rest.reasoning_content;
      delta.content += rest.content;
      for (chat::ToolCallDelta& c : rest.tool_calls) delta.tool_calls.push_back(std::move(c));
    }
  }
  if (event.finished) {
    choice.finished = true;
    if (!event.status.ok()) return Fail(event.status);
    choice.finish_reason = event.finish_reason.empty() ? "stop" : event.finish_reason;
    if (event.usage.completion_tokens > 0) choice.completion_tokens = event.usage.completion_tokens;
    if (event.usage.prompt_tokens > 0) prompt_tokens_ = event.usage.prompt_tokens;
    // The prompt counts once; its cached tokens are the first choice's (later choices of
    // the same prompt usually find more of it cached).
    if (index == 0) cached_tokens_ = event.usage.cached_tokens;
    --remaining_;
  }
  if (stream_) {
    StreamEvent(index, event, delta);
  } else if (logprobs_ && !event.logprobs.empty()) {
    if (chat_) {
      for (json& e : ChatLogprobEntries(event.logprobs, top_logprobs_, *engine_)) {
        choice.chat_logprobs.push_back(std::move(e));
      }
    } else {
      choice.completion_logprobs.Append(event.logprobs, *engine_);
    }
  }
  if (remaining_ == 0) Finish();
}

void GenerationCall::Fail(const absl::Status& status) {
  done_ = true;
  CancelUnfinished();
  if (exchange_->disconnected()) return;
  const ApiError error = ApiErrorFromStatus(status);
  if (stream_) {
    exchange_->Write(absl::StrCat("data: ", DumpJson(ErrorJson(error)), "\n\n"));
    exchange_->EndStream(/*keep_alive=*/false);
  } else {
    exchange_->Respond(ErrorResponse(error));
  }
}

void GenerationCall::Finish() {
  done_ = true;
  int64_t completion_tokens = 0;
  int64_t reasoning_tokens = 0;
  for (const Choice& c : choices_) {
    completion_tokens += c.completion_tokens;
    reasoning_tokens += std::min(c.reasoning_tokens, c.completion_tokens);
  }
  const bool reasoning = output_.has_value() && output_->parse_reasoning;
  const json usage = UsageJson(prompt_tokens_, completion_tokens, cached_tokens_,
                               reasoning ? reasoning_tokens : -1);
  if (stream_) {
    if (include_usage_) {
      json chunk = ResponseObject(header_);
      chunk["usage"] = usage;
      exchange_->Write(absl::StrCat("data: ", DumpJson(chunk), "\n\n"));
    }
    exchange_->Write("data: [DONE]\n\n");
    exchange_->EndStream();
    return;
  }
  json body = ResponseObject(header_);
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json logprobs = nullptr;
    if (logprobs_) {
      logprobs = chat_ ? json{{"content", c.chat_logprobs}, {"refusal", nullptr}}
                       : c.completion_logprobs.ToJson();
    }
    if (chat_ && output_.has_value()) {
      absl::StatusOr<chat::ParsedChatOutput> parsed = chat::ParseChatOutput(c.text, *output_);
      if (!parsed.ok()) parsed = chat::ParsedChatOutput{c.text, "", {}};
      const bool calls = !parsed->tool_calls.empty();
      body["choices"].push_back(
          {{"index", i},
           {"message", ChatMessageJson(*parsed)},
           {"logprobs", std::move(logprobs)},
           {"finish_reason",
            calls && c.finish_reason == "stop" ? std::string("tool_calls") : c.finish_reason}});
    } else if (chat_) {
      body["choices"].push_back(
          {{"index", i},
           {"message", {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}}},
           {"logprobs", std::move(logprobs)},
           {"finish_reason", c.finish_reason}});
    } else {
      body["choices"].push_back({{"index", i},
                                 {"text", c.text},
                                 {"logprobs", std::move(logprobs)},
                                 {"finish_reason", c.finish_reason}});
    }
  }
  body["usage"] = usage;
  HttpResponse response;
  response.body = DumpJson(body);
  exchange_->Respond(std::move(response));
}

}  // namespace

void StartGeneration(serving::Engine* engine, const CompletionParams& params,
                     std::vector<int32_t> prompt, ResponseHeader header,
                     std::shared_ptr<Exchange> exchange,
                     std::optional<chat::ChatOutputOptions> output) {
  auto call =
      std::make_shared<GenerationCall>(engine, params, std::move(header), std::move(exchange),
                                       static_cast<int32_t>(prompt.size()), std::move(output));
  call->Start(params, std::move(prompt));
}

}  // namespace tessera::http
