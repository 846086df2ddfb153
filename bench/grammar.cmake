# Grammar compile time and per-token mask time (JSON mode, a 20-way choice, a 10-property and
# a recursive JSON Schema) on the largest conformance vocabulary and a synthetic 154,880-token
# byte-level vocabulary.
tessera_bench(grammar_bench
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/grammar_bench.cc
  DEPS tessera_grammar tessera_tokenizer)
