// A StepRunner test double with no model: every sequence "samples" the tokens of a script
// in order, so tests choose exactly what the engine receives (byte tokens, EOS, ...). It
// can hold steps at a gate and fail a chosen step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "controller/serving/step_runner.h"

namespace tessera::testing {

class ScriptedStepRunner : public serving::StepRunner {
 public:
  explicit ScriptedStepRunner(std::vector<int32_t> script, int n_blocks = 64, int block_size = 16)
      : script_(std::move(script)), n_blocks_(n_blocks), block_size_(block_size) {}

  absl::StatusOr<tessera::v1::StepResult> RunStep(const tessera::v1::StepRequest& step) override {
    std::unique_lock<std::mutex> l(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
    tessera::v1::StepResult r;
    r.set_step_id(step.step_id());
    for (const tessera::v1::StepSequence& s : step.seqs()) {
      tessera::v1::SequenceResult* out = r.add_seqs();
      out->set_seq_id(s.seq_id());
      out->set_token(-1);
      // As the worker's sampler, the parameters of the first step hold for the sequence.
      if (s.new_sampler()) top_logprobs_[s.seq_id()] = s.sampling().top_logprobs();
      if (!s.sample()) continue;
      int& at = next_[s.seq_id()];
      out->set_token(script_[at % script_.size()]);
      ++at;
      out->set_logprob(-0.5f);
      for (int k = 0; k < top_logprobs_[s.seq_id()]; ++k) {
        auto* t = out->add_top_logprobs();
        t->set_token(k);
        t->set_logprob(-1.0f - k);
      }
    }
    return r;
  }
  int block_size() const override { return block_size_; }
  int n_blocks() const override { return n_blocks_; }
  bool ready() const override { return true; }

  // Steps wait until Open() while closed.
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits until `n` steps have entered RunStep.
  void WaitEntered(int n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return entered_ >= n; });
  }

 private:
  std::vector<int32_t> script_;
  int n_blocks_, block_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int entered_ = 0;
  std::map<uint64_t, int> next_;
  std::map<uint64_t, int> top_logprobs_;
};

}  // namespace tessera::testing
