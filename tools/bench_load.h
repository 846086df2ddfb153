// The load generator behind `tessera bench`: concurrent HTTP/1.1 keep-alive clients that send
// OpenAI /v1/completions requests to a server and time every answer (and, when streaming,
// every server-sent event). Synchronous Boost.Beast on one thread per client: at the
// concurrencies a benchmark uses (1..a few hundred) a thread per client costs nothing that
// shows up in the figures, and the timing code stays straight-line.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::cli::bench {

// "http://host[:port][/prefix]" split into its parts; https is refused (no TLS client here).
struct ServerAddress {
  std::string host;
  std::string port;              // "80" when the URL names none
  std::string path_prefix;       // "" or "/prefix" without a trailing slash
  std::string ToString() const;  // "http://host:port/prefix"
};
absl::StatusOr<ServerAddress> ParseServerUrl(const std::string& url);

struct LoadOptions {
  ServerAddress server;
  std::string model;    // sent as "model"
  std::string api_key;  // "Authorization: Bearer KEY" when not empty
  int concurrency = 1;
  int requests = 1;
  int prompt_words = 128;  // words in each request's prompt (see MakePrompt)
  int gen_len = 64;        // "max_tokens", with "ignore_eos": true
  bool stream = false;
  // Sends "logprobs": 0, so that a streaming server sends an event for every token, even
  // one whose text is empty (random-weight models emit many such tokens).
  bool logprobs = false;
  double temperature = 0.0;
  uint64_t seed = 0;  // request i is sent with "seed": seed + i and prompt MakePrompt(seed + i)
  double timeout_s = 600.0;  // per request
  // Shared-prefix mode (> 0): every prompt starts with the same "system prompt" of this many
  // words (MakePrompt(words, kSharedPrefixSeed)), then its own prompt_words.
  int shared_prefix_words = 0;
  // Multi-turn mode (> 1): `requests` are conversations of `turns` requests each, sent in
  // order by one client; turn 0's prompt has prompt_words words, turn t's is turn t-1's
  // prompt, its answer and turn_words new words (request c * turns + t uses seed + c * turns
  // + t), as a chat client resends the whole conversation. A failed turn ends its
  // conversation.
  int turns = 1;
  int turn_words = 0;  // 0: prompt_words
  // Fields merged into every request body (replacing generated ones of the same name).
  nlohmann::json extra_body = nlohmann::json::object();
};

// The shared-prefix mode's system prompt seed (no request's own prompt uses it).
inline constexpr uint64_t kSharedPrefixSeed = 0x5eed5eed5eedull;

// One request as the client saw it. status: the HTTP status, 0 when no answer came (then
// `error` says why: cannot connect, connection reset, timeout, ...).
struct RequestResult {
  int status = 0;
  std::string error;  // empty when the request succeeded
  double e2e_s = 0.0;
  double ttft_s = -1.0;       // streaming: until the first event carrying a choice
  std::vector<double> itl_s;  // streaming: gaps between consecutive token events (text or
                              // logprobs)
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens, when sent
  int turn = 0;               // multi-turn mode: 0 for a conversation's first request
  std::string text;           // the first choice's text (multi-turn mode's next prompt)
  bool ok() const { return error.empty(); }
};

struct LoadResult {
  std::vector<RequestResult> requests;
  double wall_s = 0.0;  // first request sent .. last answer received
};

// `words` space-separated words drawn from a fixed list of common English words with a
// generator seeded by `seed`: each such word is one token in most BPE vocabularies, and
// different seeds give different prompts (so no request shares a cached prefix).
std::string MakePrompt(int words, uint64_t seed);

// The JSON body of request `index` of a run with these options (outside multi-turn mode).
std::string CompletionBody(const LoadOptions& options, int index);
// The JSON body of a request with this prompt and seed.
std::string CompletionBodyFor(const LoadOptions& options, const std::string& prompt, uint64_t seed);
// Request `index`'s own prompt: its words, after the shared prefix in shared-prefix mode.
std::string PromptOf(const LoadOptions& options, int index);

// Sends options.requests requests from options.concurrency clients (each takes the next
// unsent request when its previous one is answered) and returns every result, in request
// order. Never fails as a whole: per-request failures are in the results.
LoadResult RunLoad(const LoadOptions& options);

// One request, synchronously, on a fresh connection (warm-up, calibration, checks).
RequestResult SendOne(const LoadOptions& options, int index);

// GET `target` (e.g. "/v1/models"): the HTTP status and body, or why no answer came.
struct GetResult {
  int status = 0;
  std::string body;
  std::string error;
};
GetResult HttpGet(const ServerAddress& server, const std::string& target,
                  const std::string& api_key, double timeout_s);

// The message of an OpenAI-shaped error body ({"error": {"message": ...}}), else the body
// itself shortened to one line.
std::string ErrorMessageOf(const std::string& body);

}  // namespace tessera::cli::bench
