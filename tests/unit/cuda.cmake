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
# The GPU executor against the CPU executor on generated models of every architecture
# (whole-model logits, routing, DSA keys, CUDA graphs, batch invariance, errors).
if(TARGET tessera_cuda AND TARGET tessera_executor)
  tessera_test(cuda_executor_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_executor_test.cc
    DEPS tessera_executor tessera_cuda tessera_model
    LABELS gpu
    TIMEOUT 300)
endif()
# TP = N on N GPUs (ranks as threads, NCCL) against TP = 1; skips with fewer than 2 GPUs.
if(TARGET tessera_cuda AND TARGET tessera_executor AND TARGET tessera_comm)
  tessera_test(cuda_tp_executor_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_tp_executor_test.cc
    DEPS tessera_executor tessera_cuda tessera_comm tessera_model
    LABELS gpu
    TIMEOUT 300)
endif()
# The GPU executor test again, on the CUDA emulator (kernels/cuda/emu/): the GPU path's host
# code — buffers, strides, offsets, the kernel sequence, graph capture and replay — against the
# CPU executor on every machine, under ASan/UBSan in the sanitize build.
if(TARGET tessera_executor_emu)
  tessera_test(cuda_executor_emu_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_executor_test.cc
    DEPS tessera_executor_emu tessera_cuda_emu tessera_model
    LABELS sanitize
    TIMEOUT 900)
  target_compile_definitions(cuda_executor_emu_test PRIVATE TESSERA_CUDA_EMULATOR=1)
endif()
# The GPU executor test on the SIMT emulator: the whole forward pass with the kernels' own
# source against the CPU executor, every architecture. ctest leaves out the graph tests and
# two of the three decode batch-invariance models (about 2 minutes instead of 4.5 on two
# cores); the binary alone runs all of them.
if(TARGET tessera_executor_simt)
  tessera_test(cuda_executor_simt_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_executor_test.cc
    DEPS tessera_executor_simt tessera_model
    ARGS "--gtest_filter=-*CudaGraphs*:*DecodeAloneEqualsDecodeInABatch/qwen3moe:*DecodeAloneEqualsDecodeInABatch/deepseek2:*BatchMates*"
    TIMEOUT 900)
  target_compile_definitions(cuda_executor_simt_test PRIVATE TESSERA_CUDA_EMULATOR=1
                                                             TESSERA_CUDA_SIMT=1)
endif()
# TP = 2 vs TP = 1 of the GPU executor on the emulator, with a device communicator (queued on
# the stream and captured into graphs, as NCCL) and a host one (Gloo through host copies).
if(TARGET tessera_executor_emu AND TARGET tessera_comm)
  tessera_test(cuda_tp_emu_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_tp_emu_test.cc
    DEPS tessera_executor_emu tessera_cuda_emu tessera_comm tessera_model
    LABELS sanitize
    TIMEOUT 900)
  set_tests_properties(cuda_tp_emu_test PROPERTIES RESOURCE_LOCK gloo_loopback)  # tp.cmake
endif()
# TP = 2 vs TP = 1 with the kernels' own source on the SIMT emulator (the ranks' head ranges,
# vocabulary parts and collectives through the real kernels), every architecture, and TP 3's
# device sampling; the uneven split (43 s here), graph-timing and prefix-cache cases stay on
# the CUDA emulator in ctest (the binary alone runs them all).
if(TARGET tessera_executor_simt AND TARGET tessera_comm)
  tessera_test(cuda_tp_simt_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/cuda_tp_emu_test.cc
    DEPS tessera_executor_simt tessera_comm tessera_model
    ARGS "--gtest_filter=*TwoRanksGiveTheOneRankLogits*:*ThreeRanksSampleTheGatheredRows*"
    TIMEOUT 900)
  set_tests_properties(cuda_tp_simt_test PROPERTIES RESOURCE_LOCK gloo_loopback)
endif()
# The step runner's sampling on the GPU executor: on the emulator everywhere, on a GPU with
# the label `gpu` (tests/unit/step_engine_gpu_test.cc).
if(TARGET tessera_step_engine_emu)
  tessera_test(step_engine_gpu_emu_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/step_engine_gpu_test.cc
    DEPS tessera_step_engine_emu tessera_cuda_emu tessera_model
    TIMEOUT 300)
  target_compile_definitions(step_engine_gpu_emu_test PRIVATE TESSERA_CUDA_EMULATOR=1)
endif()
# And with the kernels' own source on the SIMT emulator: SampleKernel and ChosenLogprobKernel
# themselves against the host sampler.
if(TARGET tessera_step_engine_simt)
  tessera_test(step_engine_gpu_simt_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/step_engine_gpu_test.cc
    DEPS tessera_step_engine_simt tessera_model
    TIMEOUT 300)
  target_compile_definitions(step_engine_gpu_simt_test PRIVATE TESSERA_CUDA_EMULATOR=1
                                                               TESSERA_CUDA_SIMT=1)
endif()
if(TARGET tessera_cuda AND TARGET tessera_step_engine)
  tessera_test(step_engine_gpu_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/step_engine_gpu_test.cc
    DEPS tessera_step_engine tessera_cuda tessera_model
    LABELS gpu
    TIMEOUT 300)
endif()
