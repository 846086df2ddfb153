// Continuous batching: which sequences run in the next step and how many tokens each
// feeds. Per step, within `max_num_batched_tokens`:
//   1. running sequences, oldest admission first: a decode (one token) or the next chunk
//      of a prompt being prefilled (chunked prefill);
//   2. when no running sequence had to be preempted, waiting sequences in arrival order
//      (FCFS) while `max_num_seqs`, the token budget and free KV blocks allow; a prompt
//      longer than the budget left starts with a chunk of it.
// When a running sequence needs a block and none is free, the most recently admitted
// running sequence is preempted by recompute: its blocks are freed and it goes back to the
// head of the waiting queue with prompt + generated tokens as the prefill to redo (its
// sampler stays on the worker, so its draws continue where they were). vLLM's policy.
//
// Prefix caching (when the BlockManager has it): a sequence admitted with nothing computed
// first takes the cached blocks that hold the longest prefix of its tokens (at most all
// but the last token, which must be fed to sample from) and starts its prefill after them;
// CacheComputed then offers each block it fills to the cache. A preempted sequence's
// released blocks stay cached, so its recompute usually finds most of them again.
//
// Not thread-safe: the engine calls it under its lock.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "controller/serving/block_manager.h"
#include "controller/serving/sequence.h"

namespace tessera::serving {

struct SchedulerLimits {
  int max_num_seqs = 64;
  int max_num_batched_tokens = 512;
  // Speculative decoding (n-gram lookup): a decoding sequence whose `speculate` is set feeds
  // up to this many drafted tokens after its last one (0: none), drafted from its own
  // tokens by sampling::NgramDraft with these n-gram bounds.
  int num_speculative_tokens = 0;
  int ngram_min = 2;
  int ngram_max = 4;
  // The drafts are the workers' (the model's MTP head, Sequence::mtp_drafts), not n-grams.
  bool mtp = false;
};

// What one sequence does in a step: feed tokens[start, start + n_tokens) and, when
// `sample`, get its next token (only the chunk that reaches the end of the known tokens
// samples).
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;
  int32_t n_tokens = 0;
  bool sample = false;
  // Drafted tokens fed after the chunk's (a sampling decode), verified by the workers; the
  // blocks for them are reserved.
  std::vector<int32_t> drafts;
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  int preempted = 0;
  // A sequence that needed a block while running alone: the cache can never hold it. It is
  // back in the waiting queue; the caller must end it.
  Sequence* cannot_fit = nullptr;
  int64_t prefill_tokens = 0;  // tokens of chunks that do not sample, or prompt chunks
  int64_t decode_tokens = 0;   // one-token decodes (and their drafts)
  int64_t draft_tokens = 0;    // drafted tokens fed for verification
  // Prefix caching, over the sequences admitted for the first time in this step: their
  // prompt tokens, and how many of them were found in the cache.
  int64_t prefix_queried_tokens = 0;
  int64_t prefix_hit_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(SchedulerLimits limits, BlockManager* blocks);

  // Queues a new sequence at the back of the waiting queue.
  void Enqueue(std::unique_ptr<Sequence> seq);

  // Plans the next step (reserving the blocks it needs). An empty plan while sequences wait
  // means the head of the queue cannot fit even in an empty cache (see HeadCannotFit).
  StepPlan Schedule();
  // True when nothing runs and the first waiting sequence needs more blocks than the
  // whole cache has: it can never run.
  bool HeadCannotFit() const;

  // Takes a sequence out (finished, cancelled or failed), freeing its blocks.
  std::unique_ptr<Sequence> Remove(Sequence* seq);
  // After a step computed more of `seq`'s tokens (num_computed advanced): offers the blocks
  // it filled to the prefix cache.
  void CacheComputed(Sequence* seq);
  // The block manager's invariants against the block tables of every sequence.
  absl::Status CheckBlocks() const;

  // Running in admission order; waiting in queue order (preempted ones at the head).
  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  const std::deque<std::unique_ptr<Sequence>>& waiting() const { return waiting_; }
  bool empty() const { return running_.empty() && waiting_.empty(); }
  int64_t preemptions() const { return preemptions_; }
  // Swaps in another cache (a restarted worker group may report other geometry). Only
  // when nothing holds blocks.
  void set_blocks(BlockManager* blocks) { blocks_ = blocks; }

 private:
  void Preempt(size_t running_index);
  // Gives `seq`'s blocks back; nothing of it is computed any more.
  void ReleaseBlocks(Sequence& seq);

  SchedulerLimits limits_;
  BlockManager* blocks_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  int64_t preemptions_ = 0;
};

}  // namespace tessera::serving
