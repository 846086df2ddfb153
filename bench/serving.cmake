# Throughput of the serving engine (continuous batching over an in-process StepEngine) at
# several concurrencies, next to the executor's own single-sequence decode loop.
if(TARGET tessera_serving AND TARGET tessera_step_engine)
  tessera_bench(serving_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/serving_bench.cc
    DEPS tessera_serving tessera_step_engine tessera_model)
endif()
