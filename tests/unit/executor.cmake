# The CPU executor: ops against float64, whole models against the float64 forward pass,
# batching and paging invariants, every quant type with every compute dtype.
if(TARGET tessera_executor)
  tessera_test(nn_ops_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/nn_ops_test.cc
    DEPS tessera_nn_cpu tessera_nn_reference)
  tessera_test(executor_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/executor_test.cc
    DEPS tessera_executor tessera_model_reference tessera_model
    TIMEOUT 600)
endif()
# The compute dtype's rounding points: the shared forward pass over checked CPU operations.
if(TARGET tessera_executor)
  tessera_test(forward_rounding_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/forward_rounding_test.cc
    DEPS tessera_executor tessera_model)
endif()
