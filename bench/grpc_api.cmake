# gRPC API throughput: calls and streamed tokens per second through the real GrpcServer over
# the scripted engine (no model), GetModelInfo as the unary baseline.
if(TARGET tessera_grpc_api)
  tessera_bench(grpc_api_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/grpc_api_bench.cc
    DEPS tessera_grpc_api)
endif()
