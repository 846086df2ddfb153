# A reflection-only gRPC client (Python grpcio from Debian) against the real GrpcServer over
# the echo engine: tests/clients/test_grpc_server.cc, started and stopped by the script.
if(TARGET tessera_grpc_api)
  add_executable(test_grpc_server ${CMAKE_CURRENT_LIST_DIR}/test_grpc_server.cc)
  target_include_directories(test_grpc_server PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(test_grpc_server PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(test_grpc_server PRIVATE tessera_grpc_api)

  # Debian's interpreter, where python3-grpcio is installed (not a pyenv or venv one).
  find_program(TESSERA_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(TESSERA_SYSTEM_PYTHON3)
    # Once as grpcurl asks (v1, with comments), once through gRPC's own v1alpha plugin.
    foreach(version v1 v1alpha)
      add_test(NAME grpc_reflection_client_${version}
               COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/grpc_reflection_client.py
                       --server $<TARGET_FILE:test_grpc_server>
                       --reflection grpc.reflection.${version})
      # 77: python3-grpcio is not installed (tools/install-deps.sh installs it).
      set_tests_properties(grpc_reflection_client_${version} PROPERTIES
        LABELS "clients;grpc" TIMEOUT 120 SKIP_RETURN_CODE 77)
    endforeach()
  endif()
endif()

# Hand-encoded bytes (garbage, proto3 strings that are not UTF-8, oversized client strings,
# repeated `authorization`) through grpcio's raw channel methods, against the test server and
# against tesserad itself; each status and the field its details name, and the server's log.
if(TARGET tessera_grpc_api AND TESSERA_SYSTEM_PYTHON3)
  add_test(NAME grpc_raw_bytes_client
           COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/grpc_raw_bytes_client.py
                   --server $<TARGET_FILE:test_grpc_server>)
  set_tests_properties(grpc_raw_bytes_client PROPERTIES
    LABELS "clients;grpc" TIMEOUT 120 SKIP_RETURN_CODE 77)
  if(TARGET tesserad AND TARGET tessera-worker)
    add_test(NAME tesserad_grpc_raw_bytes_client
             COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/grpc_raw_bytes_client.py
                     --tesserad $<TARGET_FILE:tesserad> --worker $<TARGET_FILE:tessera-worker>)
    set_tests_properties(tesserad_grpc_raw_bytes_client PROPERTIES
      LABELS "clients;grpc;daemon" TIMEOUT 180 SKIP_RETURN_CODE 77)
  endif()
endif()
