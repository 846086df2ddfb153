#include "kernels/cuda/staging_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::cuda {
namespace {

// Appends `length` bytes at `file_offset` of `part` to the plan, opening transfers as the
// current buffer fills. Device bytes are written in order, so a transfer's device range is
// contiguous and a new one starts when the buffer is full or the device offset jumps.
class Packer {
 public:
  Packer(const StagingOptions& o, StagingPlan* plan) : options_(o), plan_(plan) {}

  // Moves to a later device offset (a tensor's alignment padding): inside the open buffer
  // when the gap fits (the copy then carries a few don't-care bytes), else a new transfer.
  void SkipTo(uint64_t device_offset) {
    const uint64_t gap = device_offset - device_cursor_;
    if (open_ != nullptr && gap > 0) {
      if (gap < options_.buffer_bytes - open_->bytes) {
        open_->bytes += gap;
      } else {
        Close();
      }
    }
    device_cursor_ = device_offset;
  }

  void Add(uint32_t part, uint64_t file_offset, uint64_t length) {
    while (length > 0) {
      if (open_ == nullptr) Open();
      const uint64_t room = options_.buffer_bytes - open_->bytes;
      const uint64_t take = std::min(room, length);
      std::vector<StagingRead>& reads = open_->reads;
      if (!reads.empty() && reads.back().part == part &&
          reads.back().file_offset + reads.back().length == file_offset) {
        reads.back().length += take;  // contiguous in the file: one read
      } else {
        reads.push_back({part, file_offset, take, open_->bytes});
      }
      open_->bytes += take;
      device_cursor_ += take;
      file_offset += take;
      length -= take;
      plan_->file_bytes += take;
      if (open_->bytes == options_.buffer_bytes) Close();
    }
  }

  void Close() { open_ = nullptr; }

 private:
  void Open() {
    const auto index = static_cast<int64_t>(plan_->transfers.size());
    StagingTransfer t;
    t.buffer = static_cast<int>(index % options_.buffers);
    t.device_offset = device_cursor_;
    t.reuse_after = index >= options_.buffers ? index - options_.buffers : -1;
    plan_->transfers.push_back(std::move(t));
    open_ = &plan_->transfers.back();
  }

  const StagingOptions& options_;
  StagingPlan* plan_;
  StagingTransfer* open_ = nullptr;
  uint64_t device_cursor_ = 0;
};

}  // namespace

absl::StatusOr<StagingPlan> PlanStagingUpload(absl::Span<const model::TensorShard> shards,
                                              const StagingOptions& options) {
  if (options.buffer_bytes == 0 || options.buffers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("staging: ", options.buffers, " buffers of ",
                                                   options.buffer_bytes,
                                                   " bytes: expected at least one non-empty "
                                                   "buffer"));
  }
  if (options.alignment == 0 || (options.alignment & (options.alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("staging: device alignment ", options.alignment, " is not a power of two"));
  }
  for (size_t s = 0; s < shards.size(); ++s) {
    for (size_t r = 0; r < shards[s].ranges.size(); ++r) {
      const model::ByteRange& br = shards[s].ranges[r];
      if (br.count == 0 || (br.count > 1 && br.stride < br.length)) {
        return absl::InvalidArgumentError(
            absl::StrCat("staging: shard ", s, " (tensor mapping ", shards[s].mapping, ") range ",
                         r, ": count ", br.count, ", length ", br.length, ", stride ", br.stride,
                         ": expected count ≥ 1 and, when strided, stride ≥ length"));
      }
    }
  }
  StagingPlan plan;
  Packer packer(options, &plan);
  uint64_t device = 0;
  for (const model::TensorShard& shard : shards) {
    device = (device + options.alignment - 1) & ~(options.alignment - 1);
    plan.tensor_offsets.push_back(device);
    packer.SkipTo(device);
    for (const model::ByteRange& br : shard.ranges) {
      for (uint64_t i = 0; i < br.count; ++i) {
        packer.Add(br.part, br.offset + i * br.stride, br.length);
      }
      device += br.bytes();
    }
  }
  plan.device_bytes = device;
  return plan;
}

}  // namespace tessera::cuda
