# tessera generate's flags checked by the daemon's request rules (no model needed).
if(TARGET tessera_cli)
  tessera_test(generate_flags_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/generate_flags_test.cc
    DEPS tessera_cli
    LABELS unit serving
    TIMEOUT 60)
endif()
