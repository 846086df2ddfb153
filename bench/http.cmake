# REST gateway throughput: keep-alive requests per second through the real HTTP server and
# gateway over the scripted engine (no model), /health as the baseline.
if(TARGET tessera_http)
  tessera_bench(http_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/http_bench.cc
    DEPS tessera_http)
endif()
