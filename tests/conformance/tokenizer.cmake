# Tokenizer against llama.cpp's vocabulary vectors and the conformance models' prompts.
tessera_test(tokenizer_conformance_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenizer_conformance_test.cc
  DEPS tessera_tokenizer nlohmann_json::nlohmann_json
  LABELS conformance tokenizer
  TIMEOUT 120)
