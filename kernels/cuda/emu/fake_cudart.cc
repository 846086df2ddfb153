// The CUDA runtime and cuBLAS entry points the GPU executor uses, emulated on the host (see
// emu_runtime.h): one device of kEmulatedDeviceBytes, memory from the heap, streams that run
// their work at once, events that are always complete, and graph capture that records the
// work launched on the capturing stream for cudaGraphLaunch to replay. The rules a real
// runtime enforces during capture are enforced here too (no synchronization, allocation or
// synchronous copy while this thread captures), so that the executor's capture is checked on
// machines without a GPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/cuda/emu/emu_runtime.h"

struct CUstream_st {
  std::vector<std::function<void()>>* capture = nullptr;  // while capturing
};
struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
struct CUevent_st {};
struct cublasContext {
  cudaStream_t stream = nullptr;  // cublasSetStream
};

namespace {

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
thread_local int capturing = 0;  // streams this thread is capturing

std::mutex memory_mutex;
std::map<void*, size_t>& Allocations() {
  static auto* a = new std::map<void*, size_t>;
  return *a;
}
size_t allocated = 0;

cudaError_t Fail(cudaError_t e) {
  last_error = e;
  return e;
}

// What a real runtime refuses while this thread captures a stream.
bool Capturing() { return capturing > 0; }

}  // namespace

namespace tessera::cuda::emu {

void Launch(cudaStream_t stream, std::function<void()> work) {
  if (stream != nullptr && stream->capture != nullptr) {
    stream->capture->push_back(std::move(work));
    return;
  }
  work();
}

void SetLastError(cudaError_t error) { last_error = error; }

namespace {
std::mutex attribute_mutex;
std::map<const void*, size_t>& DynamicSharedLimits() {
  static auto* m = new std::map<const void*, size_t>;
  return *m;
}
}  // namespace

size_t MaxDynamicShared(const void* kernel) {
  std::lock_guard<std::mutex> lock(attribute_mutex);
  auto it = DynamicSharedLimits().find(kernel);
  return it == DynamicSharedLimits().end() ? kEmulatedSharedBytes : it->second;
}

cudaStream_t CublasStream(cublasHandle_t handle) { return handle->stream; }

}  // namespace tessera::cuda::emu

using tessera::cuda::emu::kEmulatedDeviceBytes;
using tessera::cuda::emu::Launch;

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (Capturing()) return Fail(cudaErrorStreamCaptureUnsupported);
  std::lock_guard<std::mutex> lock(memory_mutex);
  if (allocated + size > kEmulatedDeviceBytes) return Fail(cudaErrorMemoryAllocation);
  void* p = std::aligned_alloc(256, (std::max<size_t>(size, 1) + 255) / 256 * 256);
  if (p == nullptr) return Fail(cudaErrorMemoryAllocation);
  Allocations()[p] = size;
  allocated += size;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (Capturing()) return Fail(cudaErrorStreamCaptureUnsupported);
  if (ptr == nullptr) return cudaSuccess;
  std::lock_guard<std::mutex> lock(memory_mutex);
  auto it = Allocations().find(ptr);
  if (it == Allocations().end()) return Fail(cudaErrorInvalidValue);
  allocated -= it->second;
  Allocations().erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  if (Capturing()) return Fail(cudaErrorStreamCaptureUnsupported);
  *ptr = std::malloc(std::max<size_t>(size, 1));
  return *ptr != nullptr ? cudaSuccess : Fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int) {
  return cudaMallocHost(ptr, size);
}

cudaError_t cudaFreeHost(void* ptr) {
  if (Capturing()) return Fail(cudaErrorStreamCaptureUnsupported);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind) {
  if (Capturing()) return Fail(cudaErrorStreamCaptureUnsupported);
  if (count > 0) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind,
                            cudaStream_t stream) {
  Launch(stream, [=] {
    if (count > 0) std::memmove(dst, src, count);
  });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  Launch(stream, [=] {
    if (count > 0) std::memset(ptr, value, count);
  });
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream != nullptr && stream->capture != nullptr) {
    delete stream->capture;
    --capturing;
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (Capturing()) return Fail(cudaErrorStreamCaptureUnsupported);
  (void)stream;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return Fail(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int device) {
  if (device != 0) return Fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof(*prop));
  std::strncpy(prop->name, "CUDA emulator (CPU)", sizeof(prop->name) - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->totalGlobalMem = kEmulatedDeviceBytes;
  prop->multiProcessorCount = 1;
  prop->maxThreadsPerBlock = 1024;
  prop->warpSize = 32;
  prop->sharedMemPerBlock = tessera::cuda::emu::kEmulatedSharedBytes;
  prop->sharedMemPerBlockOptin = tessera::cuda::emu::kEmulatedOptinSharedBytes;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  if (device != 0) return Fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(tessera::cuda::emu::kEmulatedSharedBytes);
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(tessera::cuda::emu::kEmulatedOptinSharedBytes);
      return cudaSuccess;
    case cudaDevAttrMaxGridDimX:
      *value = 0x7fffffff;
      return cudaSuccess;
    case cudaDevAttrMaxGridDimY:
      *value = 65535;
      return cudaSuccess;
    case cudaDevAttrMultiProcessorCount:
      *value = 1;
      return cudaSuccess;
    default:
      return Fail(cudaErrorInvalidValue);
  }
}

// Only the dynamic shared memory limit: up to the opt-in maximum, as a device allows.
cudaError_t cudaFuncSetAttribute(const void* func, enum cudaFuncAttribute attr, int value) {
  if (func == nullptr || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 ||
      static_cast<size_t>(value) > tessera::cuda::emu::kEmulatedOptinSharedBytes) {
    return Fail(cudaErrorInvalidValue);
  }
  std::lock_guard<std::mutex> lock(tessera::cuda::emu::attribute_mutex);
  tessera::cuda::emu::DynamicSharedLimits()[func] = static_cast<size_t>(value);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  std::lock_guard<std::mutex> lock(memory_mutex);
  *total_bytes = kEmulatedDeviceBytes;
  *free_bytes = kEmulatedDeviceBytes - allocated;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return last_error; }

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorMemoryAllocation:
      return "out of memory (emulated device)";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    default:
      return "emulated CUDA error";
  }
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  return cudaEventCreate(event);
}

cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }

cudaError_t cudaEventSynchronize(cudaEvent_t) {
  if (Capturing()) return Fail(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode) {
  // The legacy default stream cannot be captured; nor can a stream twice.
  if (stream == nullptr || stream->capture != nullptr) return Fail(cudaErrorIllegalState);
  stream->capture = new std::vector<std::function<void()>>;
  ++capturing;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (stream == nullptr || stream->capture == nullptr) return Fail(cudaErrorIllegalState);
  *graph = new CUgraph_st{std::move(*stream->capture)};
  delete stream->capture;
  stream->capture = nullptr;
  --capturing;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (Capturing()) return Fail(cudaErrorStreamCaptureUnsupported);
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  for (const auto& work : exec->work) Launch(stream, work);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "emulated cuBLAS error";
}
