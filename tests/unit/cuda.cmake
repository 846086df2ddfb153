# Tests that need a GPU carry the label `gpu` and skip cleanly without one.
if(TARGET tessera_cuda)
  tessera_test(cuda_device_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_device_test.cc
    DEPS tessera_cuda
    LABELS gpu)
endif()
if(TARGET tessera_cuda)
  tessera_test(cuda_matmul_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_matmul_test.cc
    DEPS tessera_cuda tessera_kernels_reference tessera_quant
    LABELS gpu
    TIMEOUT 120)
endif()
