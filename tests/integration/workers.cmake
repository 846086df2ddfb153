# Real tessera-worker processes under a WorkerGroup (spawned from the test process).
if(TARGET tessera_workers AND TARGET tessera-worker)
  tessera_test(worker_group_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/worker_group_test.cc
    DEPS tessera_workers tessera_executor tessera_model
    LABELS integration
    TIMEOUT 600)
  add_dependencies(worker_group_test tessera-worker)
  set_property(TEST worker_group_test APPEND PROPERTY ENVIRONMENT
               "TESSERA_WORKER_BINARY=$<TARGET_FILE:tessera-worker>")
endif()
