# Real tessera-worker processes under a WorkerGroup (spawned from the test process).
if(TARGET tessera_workers AND TARGET tessera-worker)
  tessera_test(worker_group_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/worker_group_test.cc
    DEPS tessera_workers tessera_executor tessera_model
    LABELS integration
    TIMEOUT 600)
  add_dependencies(worker_group_test tessera-worker)
  set_tests_properties(worker_group_test PROPERTIES RESOURCE_LOCK gloo_loopback)  # unit/tp.cmake
  set_property(TEST worker_group_test APPEND PROPERTY ENVIRONMENT
               "TESSERA_WORKER_BINARY=$<TARGET_FILE:tessera-worker>")
endif()

# tesserad + tessera-worker processes over HTTP: a worker killed mid-stream, the controller
# killed (no orphans), external workers on two loopback addresses.
if(TARGET tesserad AND TARGET tessera-worker AND TARGET tessera)
  add_test(NAME daemon_workers_test
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/daemon_workers_test.py
                   $<TARGET_FILE:tesserad> $<TARGET_FILE:tessera-worker> $<TARGET_FILE:tessera>)
  set_tests_properties(daemon_workers_test PROPERTIES LABELS integration TIMEOUT 240
                       SKIP_RETURN_CODE 77)
endif()

# Every deploy/configs example passes `tesserad --config X --check`.
if(TARGET tesserad AND TARGET tessera)
  add_test(NAME configs_check_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/configs_check_test.sh $<TARGET_FILE:tesserad>
                   $<TARGET_FILE:tessera> ${PROJECT_SOURCE_DIR})
  set_tests_properties(configs_check_test PROPERTIES LABELS integration TIMEOUT 120)
endif()

# A split set (tessera gguf split) and its merge give the single file's logits.
if(TARGET tessera AND TARGET tessera-worker)
  add_test(NAME split_logits_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/split_logits_test.sh $<TARGET_FILE:tessera>)
  set_tests_properties(split_logits_test PROPERTIES LABELS integration TIMEOUT 120)
endif()

# tesserad returns the memory of large requests (RSS within 2x of idle afterwards).
if(TARGET tesserad AND TARGET tessera-worker)
  add_test(NAME daemon_memory_test
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/daemon_memory_test.py
                   $<TARGET_FILE:tesserad>)
  set_tests_properties(daemon_memory_test PROPERTIES LABELS integration TIMEOUT 180
                       SKIP_RETURN_CODE 77)
endif()
