# Grammar engine: GBNF parsing and its errors, UTF-8 classes, matching against std::regex and
# nlohmann::json, token masks against brute force on small and real vocabularies.
tessera_test(grammar_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/grammar_test.cc
  DEPS tessera_grammar tessera_tokenizer nlohmann_json::nlohmann_json
  LABELS unit grammar sanitize
  TIMEOUT 120)

# Counted repetitions (x{m,n} as one element, classified for every copy count at once)
# against the same grammars with expanded repetitions, by brute force, on a synthetic and a
# real vocabulary; the sampler's shortest endings inside repetitions.
tessera_test(grammar_repetition_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/grammar_repetition_test.cc
  DEPS tessera_grammar tessera_tokenizer
  LABELS unit grammar sanitize
  TIMEOUT 240)

# Structured-output front ends (JSON Schema, regex, choices -> GBNF): random walks checked
# against nlohmann::json and hand-written schema checks, std::regex both ways, integer ranges
# against arithmetic, first-wrong-byte offsets, error pointers and offsets, real vocabularies.
tessera_test(grammar_frontends_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/grammar_frontends_test.cc
  DEPS tessera_grammar tessera_tokenizer nlohmann_json::nlohmann_json
  LABELS unit grammar sanitize
  TIMEOUT 240)

# `tessera grammar --sample` against independent validators: Python's jsonschema
# (Draft202012Validator with format checks) for a dozen schemas and re.fullmatch for regexes,
# plus the command's exit codes and messages. Skips (77) without python3-jsonschema.
add_test(NAME grammar_frontends_validate
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/grammar_frontends_validate.py
          --tessera $<TARGET_FILE:tessera>)
set_tests_properties(grammar_frontends_validate PROPERTIES
  LABELS "unit;grammar" TIMEOUT 180 SKIP_RETURN_CODE 77)

# The worker's grammar cache (LRU by text, memory bound, errors) and the vocabulary trie
# built from a real tokenizer (bytes as decoded, special tokens never eligible).
tessera_test(grammar_cache_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/grammar_cache_test.cc
  DEPS tessera_step_engine tessera_grammar tessera_tokenizer tessera_gguf
  LABELS unit grammar
  TIMEOUT 60)
