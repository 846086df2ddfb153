# Tests that need a GPU carry the label `gpu` and skip cleanly without one. Each kernel is
# checked against the CPU reference decoders or a float64 computation on random data.
if(TARGET tessera_cuda)
  tessera_test(cuda_device_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_device_test.cc
    DEPS tessera_cuda
    LABELS gpu)
  tessera_test(cuda_matmul_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_matmul_test.cc
    DEPS tessera_cuda tessera_kernels_reference tessera_quant
    LABELS gpu
    TIMEOUT 120)
  tessera_test(cuda_nn_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_nn_test.cc
    DEPS tessera_cuda tessera_nn_reference tessera_nn_cpu
    LABELS gpu
    TIMEOUT 120)
  tessera_test(cuda_attention_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_attention_test.cc
    DEPS tessera_cuda
    LABELS gpu
    TIMEOUT 120)
  tessera_test(cuda_selection_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_selection_test.cc
    DEPS tessera_cuda
    LABELS gpu
    TIMEOUT 120)
  tessera_test(cuda_staging_upload_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_staging_upload_test.cc
    DEPS tessera_cuda
    LABELS gpu
    TIMEOUT 120)
  tessera_test(cuda_glue_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_glue_test.cc
    DEPS tessera_cuda tessera_nn_reference
    LABELS gpu
    TIMEOUT 120)
endif()
