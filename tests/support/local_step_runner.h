// A StepRunner for tests: one rank's StepEngine (executor + samplers) in this process, as
// the worker group runs it in tessera-worker. Steps are serialized.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "controller/serving/step_runner.h"
#include "worker/engine/step_engine.h"
#include "worker/executor/executor.h"

namespace tessera::testing {

class LocalStepRunner : public serving::StepRunner {
 public:
  static absl::StatusOr<std::unique_ptr<LocalStepRunner>> Create(
      const std::string& model_path, const executor::ExecutorOptions& options) {
    auto ex = executor::Executor::Create(model_path, options);
    if (!ex.ok()) return ex.status();
    return std::unique_ptr<LocalStepRunner>(new LocalStepRunner(*std::move(ex)));
  }

  absl::StatusOr<tessera::v1::StepResult> RunStep(const tessera::v1::StepRequest& step) override {
    std::lock_guard<std::mutex> l(mu_);
    ++steps_;
    if (step.seqs_size() > max_seqs_in_step_) max_seqs_in_step_ = step.seqs_size();
    absl::StatusOr<tessera::v1::StepResult> r = engine_.Run(step);
    if (r.ok()) {
      for (const tessera::v1::SequenceResult& q : r->seqs()) {
        if (q.mtp_drafts_size() > 0)
          mtp_drafts_.emplace_back(q.mtp_drafts().begin(), q.mtp_drafts().end());
      }
    }
    return r;
  }
  // The MTP drafts rank 0 returned since the last call, one list per sequence and step in
  // the order the steps ran.
  std::vector<std::vector<int32_t>> TakeMtpDrafts() {
    std::lock_guard<std::mutex> l(mu_);
    return std::exchange(mtp_drafts_, {});
  }
  int block_size() const override { return block_size_; }
  int n_blocks() const override { return n_blocks_; }
  bool ready() const override { return ready_.load(); }

  void set_ready(bool ready) { ready_ = ready; }
  int steps() const { return steps_.load(); }
  // The most sequences one step carried so far.
  int max_seqs_in_step() const { return max_seqs_in_step_.load(); }
  // Samplers rank 0 still holds (sequences not yet released).
  size_t live_samplers() {
    std::lock_guard<std::mutex> l(mu_);
    return engine_.live_samplers();
  }
  executor::Executor& executor() { return engine_.executor(); }
  // Grammars rank 0 compiled (cache misses) so far.
  size_t grammar_cache_misses() {
    std::lock_guard<std::mutex> l(mu_);
    return engine_.grammar_cache().misses();
  }

 private:
  explicit LocalStepRunner(std::unique_ptr<executor::Executor> ex)
      : block_size_(ex->block_size()), n_blocks_(ex->n_blocks()), engine_(std::move(ex), 0) {}

  const int block_size_;
  const int n_blocks_;
  std::mutex mu_;
  std::atomic<int> steps_{0};
  std::atomic<int> max_seqs_in_step_{0};
  std::atomic<bool> ready_{true};
  std::vector<std::vector<int32_t>> mtp_drafts_;  // guarded by mu_
  worker::StepEngine engine_;
};

}  // namespace tessera::testing
