# tesserad's process-level parts (controller/daemon).
if(TARGET tessera_memory_trimmer)
  tessera_test(memory_trimmer_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/memory_trimmer_test.cc
    DEPS tessera_memory_trimmer tessera_util
    LABELS unit
    TIMEOUT 60)
endif()
if(TARGET tessera_serving)
  tessera_test(prep_pool_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/prep_pool_test.cc
    DEPS tessera_serving
    LABELS "unit;serving;sanitize"
    TIMEOUT 60)
endif()
