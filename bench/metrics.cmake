# Metrics hot paths: counter increment and histogram observe, single and contended, against
# a plain increment and a disabled registry in the same run; label lookup; a full scrape.
if(TARGET tessera_metrics)
  tessera_bench(metrics_bench
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_bench.cc
    DEPS tessera_metrics)
endif()
