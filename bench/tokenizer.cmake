# Tokenization MB/s on ~1 MB of mixed English/code/CJK text (100k BPE and 32k SPM
# vocabularies from the shared conformance data), the pre-tokenizer alone as a baseline,
# and streaming detokenization.
tessera_bench(tokenizer_bench
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenizer_bench.cc
  DEPS tessera_tokenizer)
