#include "controller/http/openai_response.h"

#include <mutex>
#include <random>

namespace tessera::http {

using nlohmann::json;

json ResponseObject(const ResponseHeader& header) {
  json object = {{"id", header.id},
                 {"object", header.object},
                 {"created", header.created},
                 {"model", header.model}};
  if (!header.system_fingerprint.empty()) {
    object["system_fingerprint"] = header.system_fingerprint;
  }
  object["choices"] = json::array();
  return object;
}

json UsageJson(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
               int64_t reasoning_tokens) {
  json usage = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
  if (reasoning_tokens >= 0) {
    usage["completion_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
  }
  return usage;
}

json TokenBytes(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

json ChatLogprobEntries(const std::vector<serving::TokenLogprobs>& logprobs, int32_t top_logprobs,
                        const serving::Engine& engine) {
  json entries = json::array();
  for (const serving::TokenLogprobs& lp : logprobs) {
    const std::string text = engine.TokenText(lp.token);
    json top = json::array();
    for (size_t i = 0; i < lp.top.size() && static_cast<int32_t>(i) < top_logprobs; ++i) {
      const std::string alt = engine.TokenText(lp.top[i].first);
      top.push_back({{"token", alt}, {"logprob", lp.top[i].second}, {"bytes", TokenBytes(alt)}});
    }
    entries.push_back({{"token", text},
                       {"logprob", lp.logprob},
                       {"bytes", TokenBytes(text)},
                       {"top_logprobs", std::move(top)}});
  }
  return entries;
}

void CompletionLogprobs::Append(const std::vector<serving::TokenLogprobs>& logprobs,
                                const serving::Engine& engine) {
  for (const serving::TokenLogprobs& lp : logprobs) {
    const std::string text = engine.TokenText(lp.token);
    tokens_.push_back(text);
    token_logprobs_.push_back(lp.logprob);
    text_offset_.push_back(offset_);
    offset_ += static_cast<int64_t>(text.size());
    if (top_logprobs_ > 0) {
      // A map from token text to log-probability, as OpenAI's legacy API returns it.
      json top = json::object();
      for (size_t i = 0; i < lp.top.size() && static_cast<int32_t>(i) < top_logprobs_; ++i) {
        top[engine.TokenText(lp.top[i].first)] = lp.top[i].second;
      }
      top_.push_back(std::move(top));
    } else {
      top_.push_back(nullptr);
    }
  }
}

json CompletionLogprobs::ToJson() const {
  return {{"tokens", tokens_},
          {"token_logprobs", token_logprobs_},
          {"top_logprobs", top_},
          {"text_offset", text_offset_}};
}

void CompletionLogprobs::ClearKeepingOffset() {
  tokens_ = json::array();
  token_logprobs_ = json::array();
  top_ = json::array();
  text_offset_ = json::array();
}

std::string NewResponseId(const std::string& prefix) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::string id = prefix;
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < 24; ++i) id.push_back(kAlphabet[rng() % (sizeof(kAlphabet) - 1)]);
  return id;
}

json ChatMessageJson(const chat::ParsedChatOutput& output) {
  json message = {{"role", "assistant"}};
  if (output.content.empty() && !output.tool_calls.empty()) {
    message["content"] = nullptr;
  } else {
    message["content"] = output.content;
  }
  if (!output.reasoning_content.empty()) message["reasoning_content"] = output.reasoning_content;
  if (!output.tool_calls.empty()) {
    json calls = json::array();
    for (const chat::ToolCall& c : output.tool_calls) {
      calls.push_back({{"id", c.id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
    message["tool_calls"] = std::move(calls);
  }
  message["refusal"] = nullptr;
  return message;
}

json ChatDeltaJson(const chat::ChatOutputDelta& delta) {
  json out = json::object();
  if (!delta.reasoning_content.empty()) out["reasoning_content"] = delta.reasoning_content;
  if (!delta.content.empty()) out["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    json calls = json::array();
    for (const chat::ToolCallDelta& c : delta.tool_calls) {
      json call = {{"index", c.index}};
      if (!c.id.empty()) {
        call["id"] = c.id;
        call["type"] = "function";
      }
      json fn = json::object();
      if (!c.name.empty()) fn["name"] = c.name;
      fn["arguments"] = c.arguments;
      call["function"] = std::move(fn);
      calls.push_back(std::move(call));
    }
    out["tool_calls"] = std::move(calls);
  }
  return out;
}

}  // namespace tessera::http
