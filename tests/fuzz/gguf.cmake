# libFuzzer target for the GGUF reader, built by the sanitize preset (clang). The ctest entry
# is a short, bounded run from the seed corpus (label `fuzz`); run it longer by hand with
#   build/sanitize/tests/gguf_reader_fuzz -max_total_time=600 tests/fuzz/corpus/gguf
if(TESSERA_FUZZ)
  add_executable(gguf_reader_fuzz ${CMAKE_CURRENT_LIST_DIR}/gguf_reader_fuzz.cc)
  target_include_directories(gguf_reader_fuzz PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(gguf_reader_fuzz PRIVATE ${TESSERA_WARNINGS} -fsanitize=fuzzer)
  target_link_options(gguf_reader_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_libraries(gguf_reader_fuzz PRIVATE tessera_gguf)
  set(work "${CMAKE_CURRENT_BINARY_DIR}/fuzz_work/gguf")
  file(MAKE_DIRECTORY "${work}")
  add_test(NAME gguf_reader_fuzz
    COMMAND gguf_reader_fuzz -max_total_time=45 -rss_limit_mb=2048 -max_len=4096 -seed=1
            -print_final_stats=1 "${work}" "${CMAKE_CURRENT_LIST_DIR}/corpus/gguf")
  set_tests_properties(gguf_reader_fuzz PROPERTIES TIMEOUT 180 LABELS fuzz)
  add_dependencies(sanitize_tests gguf_reader_fuzz)
endif()
