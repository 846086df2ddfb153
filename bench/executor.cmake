# Prefill and decode tokens/s of the CPU executor on a llama-shaped ~124M model.
if(TARGET tessera_executor)
  tessera_bench(executor_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/executor_bench.cc
    DEPS tessera_executor tessera_model)
endif()
