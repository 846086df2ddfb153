# tessera bench (tools/bench_command.cc) against a real tesserad on free loopback ports, with
# the embedded default model; skips (with a message) when tesserad is not part of the build.
if(TARGET tessera_cli)
  tessera_test(bench_command_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_command_test.cc
    DEPS tessera_cli
    LABELS unit serving
    TIMEOUT 60)
  if(TARGET tesserad AND TARGET tessera-worker)
    add_dependencies(bench_command_test tesserad tessera-worker)
    set_property(TEST bench_command_test APPEND PROPERTY ENVIRONMENT
                 "TESSERA_TESSERAD_BINARY=$<TARGET_FILE:tesserad>")
  endif()
endif()
