# The request checks shared by the REST gateway, the gRPC service and `tessera generate`
# (controller/serving/request_validation.h).
if(TARGET tessera_serving)
  tessera_test(request_validation_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/request_validation_test.cc
    DEPS tessera_serving
    LABELS unit serving grpc http sanitize
    TIMEOUT 60)
endif()
