# libFuzzer target for the chat template engine, built by the sanitize preset (clang). The
# ctest entry is a short, bounded run from the seed corpus (label `fuzz`); run it longer with
#   build/sanitize/tests/chat_template_fuzz -max_total_time=600 tests/fuzz/corpus/chat
if(TESSERA_FUZZ)
  add_executable(chat_template_fuzz ${CMAKE_CURRENT_LIST_DIR}/chat_template_fuzz.cc)
  target_include_directories(chat_template_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(chat_template_fuzz PRIVATE ${TESSERA_WARNINGS} -fsanitize=fuzzer)
  target_link_options(chat_template_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(chat_template_fuzz PRIVATE tessera_chat)
  set(work "${CMAKE_CURRENT_BINARY_DIR}/fuzz_work/chat")
  file(MAKE_DIRECTORY "${work}")
  add_test(NAME chat_template_fuzz
    COMMAND chat_template_fuzz -max_total_time=45 -rss_limit_mb=2048 -max_len=2048 -timeout=10
            -seed=1 -print_final_stats=1 "${work}" "${CMAKE_CURRENT_LIST_DIR}/corpus/chat")
  set_tests_properties(chat_template_fuzz PROPERTIES TIMEOUT 180 LABELS fuzz)
  add_dependencies(sanitize_tests chat_template_fuzz)
endif()
