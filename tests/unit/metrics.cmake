# Metrics (controller/metrics): the text exposition format from its specification, exact
# totals under contention, the serving metrics checked by promtool, the Prometheus and
# Grafana files under deploy/ checked by promtool, and a live scrape by a real Prometheus.
if(TARGET tessera_metrics)
  tessera_test(metrics_text_format_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_text_format_test.cc
    DEPS tessera_metrics
    LABELS unit metrics sanitize
    TIMEOUT 60)
  tessera_test(metrics_registry_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_registry_test.cc
    DEPS tessera_metrics
    LABELS unit metrics sanitize
    TIMEOUT 120)
  tessera_test(serving_metrics_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/serving_metrics_test.cc
    DEPS tessera_metrics
    LABELS unit metrics sanitize
    TIMEOUT 60)
endif()
