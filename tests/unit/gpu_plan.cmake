# GPU worker placement (controller/workers/gpu_plan.h) and the worker's CUDA ordinal
# (worker/process/cuda_ordinal.h): pure logic, tested without a GPU.
if(TARGET tessera_gpu_plan AND TARGET tessera_worker_proc)
  tessera_test(gpu_plan_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_plan_test.cc
    DEPS tessera_gpu_plan tessera_worker_proc
    TIMEOUT 60)
endif()
# The worker group with fake GPU ranks (no processes, no GPU): setups and cache geometry.
if(TARGET tessera_workers)
  tessera_test(gpu_worker_group_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_worker_group_test.cc
    DEPS tessera_workers
    TIMEOUT 60)
endif()
# The GPU executor's traffic model (bench/gpu_traffic.h, printed by gpu_executor_bench):
# arithmetic over shapes, checked against hand-computed figures without a GPU.
if(TARGET tessera_model AND TARGET tessera_gguf AND TARGET tessera_cuda_host)
  tessera_test(gpu_traffic_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_traffic_test.cc ${PROJECT_SOURCE_DIR}/bench/gpu_traffic.cc
    DEPS tessera_model tessera_gguf tessera_cuda_host
    TIMEOUT 60)
endif()
