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
# The GPU kernel tests once more on the SIMT emulator (kernels/cuda/simt/): the kernels' own
# source, run thread by thread, against the same float64 and CPU references; the `_reverse`
# runs schedule every block's threads in reverse order, so that a read of what another thread
# writes without a barrier between them gives a different result in one of the two. In the
# sanitize build they are configured but not part of sanitize_tests (the kernels take ~13 CPU
# minutes to build there): build and run them by hand to have AddressSanitizer check every
# access the kernels make (README, "The kernels themselves without a GPU").
if(TARGET tessera_cuda_simt)
  # The emulator's own semantics: barriers, shuffles, atomics, launch limits, its checks.
  tessera_simt_sources(simt_test_sources unit/cuda_simt_test.cu)
  tessera_test(cuda_simt_test
    SOURCES ${simt_test_sources}
    DEPS tessera_cuda_simt
    TIMEOUT 120)
  foreach(area nn attention selection glue matmul)
    tessera_test(cuda_${area}_simt_test
      SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_${area}_test.cc
              ${CMAKE_CURRENT_LIST_DIR}/cuda_emu_device_sync.cc
      DEPS tessera_cuda_simt tessera_quant tessera_kernels_reference tessera_nn_reference
           tessera_nn_cpu
      TIMEOUT 900)
    target_compile_definitions(cuda_${area}_simt_test PRIVATE TESSERA_CUDA_SIMT=1)
    add_test(NAME cuda_${area}_simt_reverse_test COMMAND cuda_${area}_simt_test)
    set_tests_properties(cuda_${area}_simt_reverse_test PROPERTIES
      TIMEOUT 600
      ENVIRONMENT "TESSERA_SIMT_ORDER=reverse;TESSERA_SHARED_DIR=${TESSERA_SHARED_DIR}")
  endforeach()
endif()
