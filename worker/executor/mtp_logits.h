// The NextN/MTP draft head's teacher-forced logits of a token sequence, in the convention of
// the conformance vectors (../shared/conformance/README.md, "MTP (NextN) draft head"; the
// depth-1 MTP module of the DeepSeek-V3 report, section 2.2): the trunk runs the T tokens,
// then the MTP block runs T - 1 rows, row i pairing token tokens[i + 1] with the trunk's
// final-norm hidden state of position i and predicting tokens[i + 2]; row i attends causally
// to MTP rows 0..i only (no row with a zero hidden state in front).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/executor/executor.h"

namespace tessera::executor {

// Float32 [T - 1][n_vocab], row-major. `ex` must have loaded the MTP block
// (ExecutorOptions::load_mtp) and hold a cache of at least T tokens; it runs one trunk step
// and one MTP step over the cache's first blocks (positions 0..T-1, whatever they held).
// Errors: fewer than 2 tokens, no MTP block, and the errors of Executor::Step / MtpStep.
absl::StatusOr<std::vector<float>> TeacherForcedMtpLogits(Executor& ex,
                                                          absl::Span<const int32_t> tokens);

}  // namespace tessera::executor
