# Quantization kernels: dequantize GB/s per type, decode matvec GB/s over a weight matrix
# several times the L3 size (1 and 2 threads) beside memcpy and streaming-read bandwidth
# measured in the same run, in-cache kernel throughput, and prefill (batch 64) GFLOP/s.
# Results and how to read them: bench/README.md.
tessera_bench(quant_bench
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/quant_bench.cc
  DEPS tessera_kernels_cpu tessera_quant)
