# GGUF reader, writer, split sets and the inspect command.
tessera_test(gguf_reader_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/gguf_reader_test.cc
  DEPS tessera_gguf
  LABELS sanitize)
tessera_test(gguf_split_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/gguf_split_test.cc
  DEPS tessera_gguf
  LABELS sanitize)
# Truncation and byte-flip corruption of a small valid file; run under ASan + UBSan by the
# sanitize preset (label `sanitize`), plainly by the default one.
tessera_test(gguf_corruption_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/gguf_corruption_test.cc
  DEPS tessera_gguf
  LABELS sanitize)
if(TARGET tessera_cli)
  tessera_test(inspect_command_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/inspect_command_test.cc
    DEPS tessera_cli)
endif()
