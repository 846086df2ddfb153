# tessera gguf split|merge (tools/gguf_command.cc).
if(TARGET tessera_cli)
  tessera_test(gguf_command_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gguf_command_test.cc
    DEPS tessera_cli
    TIMEOUT 120)
endif()
