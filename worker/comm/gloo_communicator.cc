#include "worker/comm/gloo_communicator.h"

#include <chrono>
#include <exception>

#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/transport/tcp/device.h"

namespace tessera::comm {
namespace {

// Runs one Gloo call, turning its exceptions into a status; its duration goes to `*seconds`
// when given.
template <typename F>
absl::Status Guard(const char* op, F&& f, double* seconds = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  try {
    f();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("gloo ", op, " failed: ", e.what()));
  }
  if (seconds != nullptr) {
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return absl::OkStatus();
}

}  // namespace

GlooCommunicator::GlooCommunicator(std::shared_ptr<gloo::Context> context, int rank, int size)
    : context_(std::move(context)), rank_(rank), size_(size) {}

GlooCommunicator::~GlooCommunicator() = default;

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Connect(
    gloo::rendezvous::Store& store, int rank, int size, const GlooOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside a group of ", size));
  }
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.interface_address;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.prefix, store);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(context, rank, size));
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank, " of ", size, ": joining the Gloo group failed: ", e.what()));
  }
}

absl::Status GlooCommunicator::AllReduceSum(void* data, size_t count, ReduceDtype dtype) {
  if (size_ == 1 || count == 0) return absl::OkStatus();
  return ReduceAsFloat(data, count, dtype, [&](float* values, size_t n) {
    double seconds = 0;
    absl::Status s = Guard(
        "all-reduce",
        [&] {
          gloo::AllreduceOptions opts(context_);
          opts.setInput(values, n);
          opts.setOutput(values, n);
          void (*fn)(void*, const void*, const void*, size_t) = &gloo::sum<float>;
          opts.setReduceFunction(fn);
          gloo::allreduce(opts);
        },
        &seconds);
    if (s.ok()) RecordAllReduce(seconds);
    return s;
  });
}

absl::Status GlooCommunicator::AllGather(const float* in, size_t count, float* out) {
  if (size_ == 1) {
    std::copy_n(in, count, out);
    return absl::OkStatus();
  }
  return Guard("all-gather", [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<float*>(in), count);
    opts.setOutput(out, count * size_);
    gloo::allgather(opts);
  });
}

absl::Status GlooCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (size_ == 1 || bytes == 0) return absl::OkStatus();
  return Guard("broadcast", [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    gloo::broadcast(opts);
  });
}

absl::Status GlooCommunicator::Barrier() {
  if (size_ == 1) return absl::OkStatus();
  return Guard("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  });
}

}  // namespace tessera::comm
