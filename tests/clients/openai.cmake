# The official OpenAI SDK (npm `openai`, run with Node; `npm ci --prefix tests/clients`
# installs it) against the real REST gateway over the scripted echo engine:
# tests/clients/test_http_server.cc, started and stopped by run_openai_sdk_test.sh.
if(TARGET tessera_http)
  add_executable(test_http_server ${CMAKE_CURRENT_LIST_DIR}/test_http_server.cc)
  target_include_directories(test_http_server PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(test_http_server PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(test_http_server PRIVATE tessera_http)

  add_test(NAME openai_sdk_test
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_openai_sdk_test.sh
                   --server $<TARGET_FILE:test_http_server>)
  # 77: node or the npm packages are missing.
  set_tests_properties(openai_sdk_test PROPERTIES
    LABELS "clients;http" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
