# The serving engine (controller/serving): its parts against hand-derived cases, and the
# engine over an in-process StepEngine on generated models (concurrent requests equal each
# run alone, chunked prefill, preemption, cancellation, deadlines, limits, worker failure).
if(TARGET tessera_serving)
  tessera_test(serving_parts_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/serving_parts_test.cc
    DEPS tessera_serving
    LABELS unit serving sanitize
    TIMEOUT 60)
endif()
if(TARGET tessera_serving AND TARGET tessera_step_engine)
  tessera_test(serving_engine_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/serving_engine_test.cc
    DEPS tessera_serving tessera_step_engine tessera_model
    LABELS unit serving
    TIMEOUT 300)
endif()
if(TARGET tessera_serving)
  # Prefix caching's bookkeeping on hand-worked cases (block manager and scheduler).
  tessera_test(prefix_cache_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/prefix_cache_test.cc
    DEPS tessera_serving
    LABELS unit serving sanitize
    TIMEOUT 60)
endif()
if(TARGET tessera_serving AND TARGET tessera_step_engine)
  # Prefix caching through the engine: cached vs cold numerics for every architecture on the
  # exact and fast paths, multi-turn chats against the executor alone, and 64 conversations
  # with cancellations in a small cache over a runner that models the KV cache.
  tessera_test(prefix_cache_engine_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/prefix_cache_engine_test.cc
    DEPS tessera_serving tessera_step_engine tessera_model
    LABELS unit serving
    TIMEOUT 300)
endif()
