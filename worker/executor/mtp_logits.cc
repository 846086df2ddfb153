#include "worker/executor/mtp_logits.h"

#include "absl/strings/str_cat.h"

namespace tessera::executor {

absl::StatusOr<std::vector<float>> TeacherForcedMtpLogits(Executor& ex,
                                                          absl::Span<const int32_t> tokens) {
  if (tokens.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("MTP logits need at least 2 tokens, got ", tokens.size()));
  }
  if (!ex.has_mtp()) {
    return absl::FailedPreconditionError(
        "MTP logits need the MTP (NextN) block loaded (ExecutorOptions::load_mtp)");
  }
  SequenceInput trunk;
  trunk.tokens.assign(tokens.begin(), tokens.end());
  for (int b = 0; b < ex.n_blocks(); ++b) trunk.block_table.push_back(b);
  trunk.all_logits = true;
  std::vector<std::vector<float>> hidden;
  absl::StatusOr<std::vector<std::vector<float>>> logits = ex.Step({&trunk, 1}, nullptr, &hidden);
  if (!logits.ok()) return logits.status();
  // Row i: token i + 1 with the hidden of position i, at position i of the MTP cache layer.
  const size_t d = ex.hparams().n_embd, rows = tokens.size() - 1;
  SequenceInput mtp;
  mtp.tokens.assign(tokens.begin() + 1, tokens.end());
  mtp.start_pos = 0;
  mtp.block_table = trunk.block_table;
  mtp.all_logits = true;
  mtp.mtp_hidden.assign(hidden[0].begin(), hidden[0].begin() + rows * d);
  absl::StatusOr<std::vector<std::vector<float>>> drafts = ex.MtpStep({&mtp, 1});
  if (!drafts.ok()) return drafts.status();
  return std::move((*drafts)[0]);
}

}  // namespace tessera::executor
