# Sampling time per token over a 152k vocabulary (greedy, temperature, top-k, top-p, min-p,
# penalties, top log-probabilities) against an argmax loop and a full sort in the same run.
tessera_bench(sampling_bench
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/sampling_bench.cc
  DEPS tessera_sampling)
