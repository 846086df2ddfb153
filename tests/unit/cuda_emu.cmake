# The CUDA emulator's kernels (kernels/cuda/emu/) against hand-derived values: no GPU needed.
if(TARGET tessera_cuda_emu)
  tessera_test(cuda_emu_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_emu_test.cc
    DEPS tessera_cuda_emu tessera_quant
    TIMEOUT 60)
  # The GPU kernel tests (tests/unit/cuda.cmake) again on the emulator: the emulated kernels
  # against the same float64 and CPU references as the real ones (device and staging_upload
  # exercise the emulated runtime).
  foreach(area device nn attention selection glue matmul staging_upload)
    tessera_test(cuda_${area}_emu_test
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_${area}_test.cc
              ${CMAKE_CURRENT_LIST_DIR}/cuda_emu_device_sync.cc
      DEPS tessera_cuda_emu tessera_quant tessera_kernels_reference tessera_nn_reference
           tessera_nn_cpu
      TIMEOUT 300)
  endforeach()
endif()
