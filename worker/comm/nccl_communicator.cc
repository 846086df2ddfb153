#include "worker/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/store.h"

namespace tessera::comm {

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* scratch = nullptr;  // one float for Barrier
  // A start and an end event per all-reduce of a step, reused step after step; `queued` of
  // them hold this step's calls.
  std::vector<std::array<cudaEvent_t, 2>> events;
  size_t queued = 0;

  // The events of the next all-reduce, or null when they cannot be created or `max` calls
  // are already queued untaken (the call then goes untimed; timing never fails a collective).
  const cudaEvent_t* NextEvents(size_t max) {
    if (queued == events.size()) {
      if (events.size() >= max) return nullptr;
      std::array<cudaEvent_t, 2> pair{};
      if (cudaEventCreate(&pair[0]) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      if (cudaEventCreate(&pair[1]) != cudaSuccess) {
        cudaEventDestroy(pair[0]);
        cudaGetLastError();
        return nullptr;
      }
      events.push_back(pair);
    }
    return events[queued++].data();
  }
};

namespace {

absl::Status NcclStatus(ncclResult_t r, const char* op) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("nccl ", op, " failed: ", ncclGetErrorString(r)));
}

absl::Status CudaStatus(cudaError_t e, const char* op) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(op, " failed: ", cudaGetErrorString(e)));
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<State> state, int rank, int size)
    : state_(std::move(state)), rank_(rank), size_(size) {}

NcclCommunicator::~NcclCommunicator() {
  for (const auto& pair : state_->events) {
    cudaEventDestroy(pair[0]);
    cudaEventDestroy(pair[1]);
  }
  if (state_->comm != nullptr) ncclCommDestroy(state_->comm);
  if (state_->scratch != nullptr) cudaFree(state_->scratch);
  if (state_->stream != nullptr) cudaStreamDestroy(state_->stream);
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Connect(
    gloo::rendezvous::Store& store, const std::string& prefix, int rank, int size, int device,
    std::chrono::milliseconds timeout) {
  if (absl::Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
  ncclUniqueId id;
  const std::string key = prefix + "nccl_id";
  try {
    if (rank == 0) {
      if (absl::Status s = NcclStatus(ncclGetUniqueId(&id), "get unique id"); !s.ok()) return s;
      store.set(key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      store.wait({key}, timeout);
      std::vector<char> v = store.get(key);
      if (v.size() != sizeof(id.internal)) {
        return absl::InternalError("the NCCL unique id in the rendezvous store has a wrong size");
      }
      std::memcpy(id.internal, v.data(), v.size());
    }
  } catch (const std::exception& e) {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank, ": the NCCL unique id never arrived: ", e.what()));
  }
  auto state = std::make_unique<State>();
  if (absl::Status s = NcclStatus(ncclCommInitRank(&state->comm, size, id, rank), "init");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaStatus(cudaStreamCreate(&state->stream), "cudaStreamCreate"); !s.ok()) {
    return s;
  }
  if (absl::Status s = CudaStatus(cudaMalloc(&state->scratch, sizeof(float)), "cudaMalloc");
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(state), rank, size));
}

absl::Status NcclCommunicator::AllReduceSumOnStream(void* data, size_t count, ReduceDtype dtype,
                                                    void* stream) {
  const ncclDataType_t t = dtype == ReduceDtype::kFloat32    ? ncclFloat32
                           : dtype == ReduceDtype::kBFloat16 ? ncclBfloat16
                                                             : ncclFloat16;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // Inside stream capture an event record must be an external event node to be replayed.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &capture) != cudaSuccess) cudaGetLastError();
  const unsigned flags =
      capture == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault;
  const cudaEvent_t* events = state_->NextEvents(kMaxTimedAllReduces);
  if (events != nullptr && cudaEventRecordWithFlags(events[0], s, flags) != cudaSuccess) {
    cudaGetLastError();
  }
  absl::Status status =
      NcclStatus(ncclAllReduce(data, data, count, t, ncclSum, state_->comm, s), "all-reduce");
  if (events != nullptr && cudaEventRecordWithFlags(events[1], s, flags) != cudaSuccess) {
    cudaGetLastError();
  }
  return status;
}

std::vector<double> NcclCommunicator::TakeAllReduceSeconds() {
  std::vector<double> seconds;
  const size_t n = std::min(state_->queued, state_->events.size());
  for (size_t i = 0; i < n; ++i) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, state_->events[i][0], state_->events[i][1]) == cudaSuccess) {
      seconds.push_back(ms / 1e3);
    } else {
      cudaGetLastError();  // not recorded (a failed step): no observation
    }
  }
  state_->queued = 0;
  return seconds;
}

size_t NcclCommunicator::queued_allreduces() const { return state_->queued; }

void NcclCommunicator::set_queued_allreduces(size_t n) {
  state_->queued = std::min(n, state_->events.size());
}

absl::Status NcclCommunicator::AllGatherOnStream(const float* in, size_t count, float* out,
                                                 void* stream) {
  return NcclStatus(
      ncclAllGather(in, out, count, ncclFloat32, state_->comm, static_cast<cudaStream_t>(stream)),
      "all-gather");
}

absl::Status NcclCommunicator::AllReduceSum(void* data, size_t count, ReduceDtype dtype) {
  if (absl::Status s = AllReduceSumOnStream(data, count, dtype, state_->stream); !s.ok()) {
    return s;
  }
  return CudaStatus(cudaStreamSynchronize(state_->stream), "all-reduce sync");
}

absl::Status NcclCommunicator::AllGather(const float* in, size_t count, float* out) {
  if (absl::Status s = AllGatherOnStream(in, count, out, state_->stream); !s.ok()) return s;
  return CudaStatus(cudaStreamSynchronize(state_->stream), "all-gather sync");
}

absl::Status NcclCommunicator::Broadcast(void* data, size_t bytes, int root) {
  if (absl::Status s = NcclStatus(
          ncclBroadcast(data, data, bytes, ncclUint8, root, state_->comm, state_->stream),
          "broadcast");
      !s.ok()) {
    return s;
  }
  return CudaStatus(cudaStreamSynchronize(state_->stream), "broadcast sync");
}

absl::Status NcclCommunicator::Barrier() {
  // An all-reduce of one float, not timed: it is not one of the model's all-reduces.
  if (absl::Status s = NcclStatus(ncclAllReduce(state_->scratch, state_->scratch, 1, ncclFloat32,
                                                ncclSum, state_->comm, state_->stream),
                                  "barrier");
      !s.ok()) {
    return s;
  }
  return CudaStatus(cudaStreamSynchronize(state_->stream), "barrier sync");
}

}  // namespace tessera::comm
