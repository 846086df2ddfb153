tessera_test(quant_vectors_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/quant_vectors_test.cc
  DEPS tessera_quant tessera_kernels_cpu tessera_gguf absl::strings
  LABELS conformance quant sanitize
  TIMEOUT 60)
