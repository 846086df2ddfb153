// Which CUDA ordinal a worker's `WorkerSetup.gpu` names inside the worker process.
#pragma once

namespace tessera::worker {

// tesserad spawns each GPU worker with CUDA_VISIBLE_DEVICES set to its one device, which
// the worker then sees as ordinal 0; a worker started by hand (or with several devices
// visible) uses `setup_gpu` as an ordinal of what it sees. `cuda_visible_devices` is the
// environment variable's value, null when unset.
int CudaOrdinal(const char* cuda_visible_devices, int setup_gpu);

}  // namespace tessera::worker
