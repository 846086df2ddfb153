// The ranks of a tensor-parallel group as threads of one test: each connects its
// communicator, creates its executor on its shard and runs the same steps; the test gets rank
// 0's logits and the check that every rank returned the same (the vocab-parallel head gathers
// the whole rows on every rank). Used by the TP tests of the CPU, GPU and emulated executors.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/comm/communicator.h"
#include "worker/executor/executor.h"

namespace tessera::testing {

// A prefill of two sequences of `len0` and `len1` tokens (all logits), then `decodes` steps of
// one token for both (only the last logits). Blocks of 16 tokens, numbered in order.
inline std::vector<std::vector<executor::SequenceInput>> PrefillThenDecode(int len0, int len1,
                                                                           int decodes) {
  std::vector<executor::SequenceInput> seqs(2);
  for (int i = 0; i < len0; ++i) seqs[0].tokens.push_back((31 * i + 7) % 250);
  for (int i = 0; i < len1; ++i) seqs[1].tokens.push_back((17 * i + 3) % 250);
  const int blocks0 = (len0 + decodes + 15) / 16, blocks1 = (len1 + decodes + 15) / 16;
  for (int b = 0; b < blocks0; ++b) seqs[0].block_table.push_back(b);
  for (int b = 0; b < blocks1; ++b) seqs[1].block_table.push_back(blocks0 + b);
  for (auto& s : seqs) s.all_logits = true;
  std::vector<std::vector<executor::SequenceInput>> steps = {seqs};
  for (int k = 0; k < decodes; ++k) {
    for (auto& s : seqs) {
      s.start_pos += static_cast<int64_t>(s.tokens.size());
      s.tokens = {(11 * k + 42) % 250};
      s.all_logits = false;
    }
    steps.push_back(seqs);
  }
  return steps;
}

// Rank r's communicator of a group of tp (called only when tp > 1).
using ConnectFn = std::function<absl::StatusOr<std::unique_ptr<comm::Communicator>>(int rank)>;

struct RanksResult {
  std::vector<float> logits;  // rank 0's logits of every step, flattened
  std::string rank0_error;    // "" when rank 0 succeeded
  // Every rank's step traces (the experts each token chose), one per step, where asked.
  std::vector<std::vector<executor::StepTrace>> traces;
  // Rank 0's device samples (SequenceInput::device_sample), per step per sequence; token -1
  // where a sequence's logits row came back instead.
  std::vector<executor::SampledToken> sampled;
};

// Called on rank r's thread after each of its steps, with its communicator (null at TP 1).
using AfterStepFn = std::function<void(int rank, int step, comm::Communicator* comm)>;

// Runs `steps` on `tp` ranks: rank r connects with `connect(r)`, creates its executor of
// `path` with `options(r)` (tp_rank, tp_size and comm set here) and runs every step. Every
// rank's error is a test failure unless `rank0_error_expected` says the caller looks at rank
// 0's error itself (e.g. a model that cannot be split this way).
inline RanksResult RunOnRanks(const std::string& path, int tp,
                              const std::function<executor::ExecutorOptions(int rank)>& options,
                              const ConnectFn& connect,
                              const std::vector<std::vector<executor::SequenceInput>>& steps,
                              bool rank0_error_expected = false,
                              const AfterStepFn& after_step = nullptr, bool trace = false) {
  std::vector<std::vector<float>> out(tp);
  std::vector<std::string> errors(tp);
  std::vector<std::vector<executor::StepTrace>> traces(tp);
  std::vector<std::vector<executor::SampledToken>> sampled(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<comm::Communicator> comm;
      executor::ExecutorOptions o = options(r);
      if (tp > 1) {
        auto c = connect(r);
        if (!c.ok()) {
          errors[r] = absl::StrCat("connect: ", c.status().ToString());
          return;
        }
        comm = *std::move(c);
        o.comm = comm.get();
      }
      o.tp_rank = r;
      o.tp_size = tp;
      auto ex = executor::Executor::Create(path, o);
      if (!ex.ok()) {
        errors[r] = absl::StrCat("Executor::Create: ", ex.status().ToString());
        return;
      }
      for (size_t k = 0; k < steps.size(); ++k) {
        executor::StepTrace* t = trace ? &traces[r].emplace_back() : nullptr;
        std::vector<executor::SampledToken> step_sampled;
        auto logits = (*ex)->Step(steps[k], t, nullptr, &step_sampled);
        if (!logits.ok()) {
          errors[r] = absl::StrCat("Step: ", logits.status().ToString());
          return;
        }
        sampled[r].insert(sampled[r].end(), step_sampled.begin(), step_sampled.end());
        for (const auto& rows : *logits) out[r].insert(out[r].end(), rows.begin(), rows.end());
        if (after_step) after_step(r, static_cast<int>(k), comm.get());
      }
    });
  }
  for (auto& t : threads) t.join();
  RanksResult result{out[0], errors[0], std::move(traces), std::move(sampled[0])};
  if (rank0_error_expected && !errors[0].empty()) return result;
  for (int r = 0; r < tp; ++r) EXPECT_EQ(errors[r], "") << "tp " << tp << " rank " << r;
  for (int r = 1; r < tp; ++r) {
    EXPECT_TRUE(out[r] == out[0]) << "tp " << tp << ": rank " << r
                                  << " logits differ from rank 0's";
  }
  return result;
}

}  // namespace tessera::testing
