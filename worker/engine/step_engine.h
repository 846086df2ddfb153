// One rank's side of a step: runs a StepRequest of the control protocol on this rank's
// executor and, on rank 0, samples with per-sequence samplers that live until the
// controller releases the sequence. Used by tessera-worker, and in-process by tools and
// tests (TP = 1 without a communicator).
//
// Structured output: a sequence whose sampling carries a grammar gets a grammar matcher
// beside its sampler; every sample is masked to the tokens that keep the output inside the
// grammar (the stop tokens only where it can end), and the result says when a token
// completed it (grammar_end). Grammars are compiled against the model's vocabulary (built
// from the GGUF's tokenizer on the first constrained sequence) and cached by their text.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "common/grammar/matcher.h"
#include "tessera/v1/worker.pb.h"
#include "worker/engine/grammar_cache.h"
#include "worker/executor/executor.h"
#include "worker/sampling/sampling.h"

namespace tessera::worker {

class StepEngine {
 public:
  // `executor` runs this rank's shard; `rank` 0 samples and fills the result's sequences.
  StepEngine(std::unique_ptr<executor::Executor> executor, int rank);

  // Runs the step. Rank 0's result lists the sequences in request order with the sampled
  // token (when asked), its log-probabilities and the requested logits; other ranks return
  // an empty list. INVALID_ARGUMENT for a malformed step (bad sampling parameters, tokens
  // outside the vocabulary, positions beyond the block table); nothing is written then.
  absl::StatusOr<tessera::v1::StepResult> Run(const tessera::v1::StepRequest& step);

  // Rank 0: builds the vocabulary's trie for structured output (a tokenizer build, 0.1-0.5 s
  // for 150k tokens) on a background thread now, so that the first constrained request does
  // not stall a step for it (the daemon's workers call it once loaded; without it the trie
  // is built at the first constrained request). No-op on other ranks.
  void PrepareStructuredOutput();

  executor::Executor& executor() { return *executor_; }
  int rank() const { return rank_; }
  size_t live_samplers() const { return sequences_.size(); }
  // Tokens rank 0 had sampled on the executor's device (Executor::samples_on_device) so far.
  uint64_t device_samples() const { return device_samples_; }
  const GrammarCache& grammar_cache() const { return grammars_; }

 private:
  // What rank 0 keeps per sequence until the controller releases it.
  struct SequenceState {
    sampling::Sampler sampler;
    std::unique_ptr<grammar::Matcher> matcher;  // structured output, else null
    std::vector<uint64_t> mask;                 // the matcher's token mask, reused
  };
  // Every rank, per sequence drafting with the MTP block: the state of the position whose
  // next token is not known yet (a prompt chunk's last), -1: none.
  struct MtpState {
    int64_t pending_pos = -1;
    std::vector<float> pending_hidden;
  };
  // The MTP rows of the step's MTP sequences and, for those that sampled, the drafts
  // (StepSequence.mtp): `outcome` (2 per sequence: drafts kept, the token after them) is
  // rank 0's and is broadcast first; `result` is rank 0's (null elsewhere).
  absl::Status RunMtp(const tessera::v1::StepRequest& step,
                      const std::vector<std::vector<float>>& hidden, std::vector<int32_t>& outcome,
                      tessera::v1::StepResult* result);
  // Starts building vocab_trie_ on a background thread unless it was started already.
  void StartVocabularyTrie();
  // Samples sequence state `st` from `logits` (one row), masked by its grammar when it has
  // one; fills grammar_end.
  sampling::SampleResult SampleOne(SequenceState& st, absl::Span<const float> logits,
                                   bool* grammar_end);

  std::unique_ptr<executor::Executor> executor_;
  int rank_;
  std::map<uint64_t, SequenceState> sequences_;
  std::map<uint64_t, MtpState> mtp_;
  uint64_t device_samples_ = 0;
  // The vocabulary as grammars see it, built in the background on rank 0.
  std::shared_future<absl::StatusOr<std::shared_ptr<const grammar::TokenTrie>>> vocab_trie_;
  GrammarCache grammars_;
};

// The protocol's sampling parameters as the sampler takes them.
sampling::SamplingParams FromProto(const tessera::v1::StepSampling& p);

}  // namespace tessera::worker
