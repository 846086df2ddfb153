# GPU micro-benchmark for tests/gpu/run.sh (a plain main: it prints a table; never asserts).
if(TARGET tessera_cuda)
  tessera_bench(cuda_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_bench.cc
    DEPS tessera_cuda tessera_kernels_cpu tessera_quant)
endif()
# The GPU executor on a whole model: decode tok/s at batch 1 and 32, prefill, GB/s next to a
# device-to-device copy (a plain main printing grep-able lines; skips without a GPU).
if(TARGET tessera_cuda AND TARGET tessera_executor)
  tessera_bench(gpu_executor_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_executor_bench.cc ${CMAKE_CURRENT_LIST_DIR}/gpu_traffic.cc
    DEPS tessera_executor tessera_cuda tessera_cuda_host tessera_model tessera_gguf)
endif()
