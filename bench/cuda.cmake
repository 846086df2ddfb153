# GPU micro-benchmark for tests/gpu/run.sh (a plain main: it prints a table; never asserts).
if(TARGET tessera_cuda)
  tessera_bench(cuda_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_bench.cc
    DEPS tessera_cuda tessera_kernels_cpu tessera_quant)
endif()
