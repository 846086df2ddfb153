tessera_test(quant_types_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/quant_types_test.cc
  DEPS tessera_quant
  LABELS unit quant sanitize
  TIMEOUT 60)
tessera_test(quantize_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/quantize_test.cc
  DEPS tessera_quant
  LABELS unit quant sanitize
  TIMEOUT 60)
tessera_test(dequantize_fast_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/dequantize_fast_test.cc
  DEPS tessera_kernels_cpu tessera_quant
  LABELS unit quant sanitize
  TIMEOUT 60)
tessera_test(thread_pool_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/thread_pool_test.cc
  DEPS tessera_kernels_cpu
  LABELS unit quant sanitize
  TIMEOUT 60)
tessera_test(matmul_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/matmul_test.cc
  DEPS tessera_kernels_cpu tessera_kernels_reference tessera_quant
  LABELS unit quant sanitize
  TIMEOUT 120)
tessera_test(activation_quant_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/activation_quant_test.cc
  DEPS tessera_kernels_cpu
  LABELS unit quant sanitize
  TIMEOUT 60)
tessera_test(int8_gemm_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/int8_gemm_test.cc
  DEPS tessera_kernels_cpu tessera_quant
  LABELS unit quant sanitize
  TIMEOUT 60)
tessera_test(nn_ops_vector_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/nn_ops_vector_test.cc
  DEPS tessera_nn_cpu tessera_nn_reference
  LABELS unit quant sanitize
  TIMEOUT 60)
tessera_test(paged_attention_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/paged_attention_test.cc
  DEPS tessera_nn_cpu
  LABELS unit quant sanitize
  TIMEOUT 60)
