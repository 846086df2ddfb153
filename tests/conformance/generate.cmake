# `tessera generate` end to end on the real stories260K model.
if(TARGET tessera_cli AND TARGET tessera_executor)
  tessera_test(generate_command_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/generate_command_test.cc
    DEPS tessera_cli
    LABELS conformance)
endif()
