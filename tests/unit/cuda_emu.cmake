# The CUDA emulator's kernels (kernels/cuda/emu/) against hand-derived values: no GPU needed.
if(TARGET tessera_cuda_emu)
  tessera_test(cuda_emu_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_emu_test.cc
    DEPS tessera_cuda_emu tessera_quant
    TIMEOUT 60)
endif()
