# Tests that need a GPU carry the label `gpu` and skip cleanly without one.
if(TARGET tessera_cuda)
  tessera_test(cuda_device_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_device_test.cc
    DEPS tessera_cuda
    LABELS gpu)
endif()
