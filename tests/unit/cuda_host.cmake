# Host-side logic of the CUDA backend: no GPU and no CUDA toolkit needed.
if(TARGET tessera_cuda_host)
  tessera_test(cuda_host_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_launch_config_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/cuda_memory_planner_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/cuda_staging_plan_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/cuda_rope_factors_test.cc
            ${CMAKE_CURRENT_LIST_DIR}/cuda_decode_host_test.cc
    DEPS tessera_cuda_host tessera_nn_reference tessera_quant
    TIMEOUT 60)
endif()
