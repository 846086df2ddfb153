# libFuzzer target for the chat-request path (request body -> gateway parsing -> chat template
# render -> tokenization -> Submit's checks), built by the sanitize preset (clang). The ctest
# entry is a short, bounded run from the seed corpus (label `fuzz`); run it longer with
#   build/sanitize/tests/chat_request_fuzz -max_total_time=600 -dict=tests/fuzz/chat_request.dict \
#       tests/fuzz/corpus/chat_request
if(TESSERA_FUZZ)
  add_executable(chat_request_fuzz ${CMAKE_CURRENT_LIST_DIR}/chat_request_fuzz.cc)
  target_include_directories(chat_request_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(chat_request_fuzz PRIVATE ${TESSERA_WARNINGS} -fsanitize=fuzzer)
  target_link_options(chat_request_fuzz PRIVATE -fsanitize=fuzzer)
  # tessera_http for ParseCompletionRequest and the error bodies (only those objects are
  # linked in; the server itself is not), tessera_serving for LoadModelText, ValidateRequest
  # and OutputText, tessera_model for the synthetic (default) models.
  target_link_libraries(chat_request_fuzz PRIVATE tessera_http tessera_serving tessera_model
                                                  tessera_tokenizer tessera_chat)
  set(work "${CMAKE_CURRENT_BINARY_DIR}/fuzz_work/chat_request")
  file(MAKE_DIRECTORY "${work}")
  add_test(NAME chat_request_fuzz
    COMMAND chat_request_fuzz -max_total_time=45 -rss_limit_mb=2048 -max_len=4096 -timeout=10
            -seed=1 -print_final_stats=1 -dict=${CMAKE_CURRENT_LIST_DIR}/chat_request.dict
            "${work}" "${CMAKE_CURRENT_LIST_DIR}/corpus/chat_request")
  set_tests_properties(chat_request_fuzz PROPERTIES TIMEOUT 180 LABELS fuzz)
  add_dependencies(sanitize_tests chat_request_fuzz)
endif()
