// One request as the scheduler tracks it: its tokens so far, how many of them are in the
// KV cache, its blocks, and what the API is waiting for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "controller/serving/engine.h"
#include "controller/serving/output_text.h"
#include "worker/sampling/speculative.h"

namespace tessera::serving {

using Clock = std::chrono::steady_clock;

// Shared between the engine and the request's RequestHandle (which may outlive either).
struct CancelFlag {
  std::atomic<bool> cancelled{false};
};

struct Sequence {
  uint64_t seq_id = 0;  // unique for the engine's lifetime; the worker's sampler key
  GenerateRequest request;
  EventSink sink;
  std::shared_ptr<CancelFlag> cancel;
  int32_t max_tokens = 0;  // resolved: what the request may generate
  std::optional<Clock::time_point> deadline;

  // Prompt followed by the generated tokens. The KV cache holds the first `num_computed`;
  // a running sequence feeds the rest next (a prefill chunk, or the last sampled token).
  std::vector<int32_t> tokens;
  int32_t prompt_len = 0;
  int64_t num_computed = 0;
  std::vector<int32_t> block_table;
  // Prefix caching: the leading blocks of block_table already offered to the cache
  // (BlockManager::CacheFullBlocks), and the prompt tokens the first admission found
  // cached (usage's cached_tokens; -1 until admitted).
  int cache_committed = 0;
  int32_t cached_tokens = -1;
  // The worker holds this sequence's sampler (created by its first step); it survives
  // preemption and is dropped by release_seq_ids.
  bool sampler_created = false;
  // Speculative decoding drafts tokens for this sequence (n-gram lookup; EngineOptions):
  // decodes that carried drafts, drafted tokens, drafts kept (for the request's log line).
  bool speculate = false;
  int32_t spec_drafts = 0;
  int32_t spec_draft_tokens = 0;
  int32_t spec_accepted_tokens = 0;
  // The n-grams of `tokens`, kept as they grow, so that drafting does not scan them all.
  sampling::NgramIndex ngram_index;
  // --speculative mtp: the MTP head's drafts after the last token (from the step that
  // sampled it; empty until one did).
  std::vector<int32_t> mtp_drafts;

  std::unique_ptr<OutputText> text;

  Clock::time_point arrival;
  std::optional<Clock::time_point> first_scheduled, first_token, last_token;

  int32_t generated() const { return static_cast<int32_t>(tokens.size()) - prompt_len; }
  int64_t uncomputed() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
};

}  // namespace tessera::serving
