tessera_bench(quant_bench
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/quant_bench.cc
  DEPS tessera_kernels_cpu tessera_quant)
