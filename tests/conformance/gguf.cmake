# Every real GGUF in ../shared/conformance opens, and `inspect --json` agrees with an
# independent scan of its keys and tensors.
if(TARGET tessera_cli)
  tessera_test(gguf_conformance_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/gguf_conformance_test.cc
    DEPS tessera_cli
    LABELS conformance)
endif()
