# Chat template render time for a 50-message conversation (built-in GLM-4 and ChatML, and
# the shared conformance templates when present), against direct string concatenation of
# the same ChatML prompt as the baseline.
tessera_bench(chat_bench
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_bench.cc
  DEPS tessera_chat)
