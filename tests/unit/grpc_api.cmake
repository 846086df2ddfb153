if(TARGET tessera_grpc_api)
  tessera_test(grpc_api_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/grpc_api_test.cc
    DEPS tessera_grpc_api
    LABELS unit grpc
    TIMEOUT 120)
  # Tools, tool calls and reasoning in Chat (request fields, errors, parsed chunks).
  tessera_test(grpc_chat_tools_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/grpc_chat_tools_test.cc
    DEPS tessera_grpc_api
    LABELS unit grpc
    TIMEOUT 120)
endif()
