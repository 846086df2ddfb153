# Tokenizer: vocabulary loading and errors, BPE / SentencePiece encoding on hand-made
# vocabularies, pre-tokenizer splits, decoding and streaming detokenization.
tessera_test(tokenizer_vocab_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenizer_vocab_test.cc
  DEPS tessera_tokenizer
  LABELS unit tokenizer sanitize
  TIMEOUT 60)
tessera_test(tokenizer_encode_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenizer_encode_test.cc
  DEPS tessera_tokenizer
  LABELS unit tokenizer sanitize
  TIMEOUT 60)
tessera_test(tokenizer_decode_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenizer_decode_test.cc
  DEPS tessera_tokenizer
  LABELS unit tokenizer sanitize
  TIMEOUT 60)
tessera_test(tokenizer_plain_text_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenizer_plain_text_test.cc
  DEPS tessera_tokenizer
  LABELS unit tokenizer sanitize
  TIMEOUT 60)
if(TARGET tessera_cli)
  tessera_test(tokenize_command_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/tokenize_command_test.cc
    DEPS tessera_cli
    LABELS unit tokenizer
    TIMEOUT 60)
endif()
