# Control-plane round trip, Gloo and shared-memory all-reduce and per-worker load figures (workers_bench).
if(TARGET tessera_workers AND TARGET tessera_comm)
  add_executable(workers_bench ${CMAKE_CURRENT_LIST_DIR}/workers_bench.cc)
  target_include_directories(workers_bench PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(workers_bench PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(workers_bench PRIVATE tessera_workers tessera_comm)
  add_dependencies(workers_bench tessera-worker)
  set_target_properties(workers_bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${TESSERA_BIN_DIR})
endif()
