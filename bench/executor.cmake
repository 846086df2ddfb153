# Prefill and decode tokens/s of the CPU executor on a llama-shaped ~124M model.
if(TARGET tessera_executor)
  tessera_bench(executor_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/executor_bench.cc
    DEPS tessera_executor tessera_model)
endif()

# Bytes each tensor-parallel rank reads per decode step, expert parallelism vs divided
# experts, on a real routing (bench/expert_parallel_bench.sh runs it beside the tokens/s).
if(TARGET tessera_executor)
  tessera_bench(expert_traffic
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/expert_traffic.cc
    DEPS tessera_executor tessera_model)
endif()
