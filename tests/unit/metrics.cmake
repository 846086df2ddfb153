# Metrics (controller/metrics, on prometheus-cpp): the exposition read back by an
# independent parser, exact totals under contention, the serving metrics checked by
# promtool, the Prometheus and Grafana files under deploy/ checked by promtool, and a live
# scrape at TP 2 by a real Prometheus.
if(TARGET tessera_metrics)
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

# The deploy/ files: promtool checks the scrape config and the alert rules, and runs the
# alerts' unit tests (each alert fires on a series that breaks it, none on a healthy one);
# the Grafana dashboard's panels and queries are checked statically (PromQL through promtool).
find_program(TESSERA_PYTHON3 python3)
find_program(TESSERA_PROMTOOL promtool)
set(deploy_dir ${PROJECT_SOURCE_DIR}/deploy)
if(TESSERA_PROMTOOL)
  add_test(NAME prometheus_config_check
    COMMAND ${TESSERA_PROMTOOL} check config ${deploy_dir}/prometheus/prometheus.yml)
  add_test(NAME prometheus_rules_check
    COMMAND ${TESSERA_PROMTOOL} check rules ${deploy_dir}/prometheus/alerts.yml)
  add_test(NAME prometheus_alerts_test
    COMMAND ${TESSERA_PROMTOOL} test rules ${CMAKE_CURRENT_LIST_DIR}/prometheus_alerts_test.yml)
else()
  foreach(t prometheus_config_check prometheus_rules_check prometheus_alerts_test)
    add_test(NAME ${t} COMMAND sh -c
      "echo 'SKIP: promtool not found (Debian package prometheus; tools/install-deps.sh)'; exit 77")
  endforeach()
endif()
set_tests_properties(prometheus_config_check prometheus_rules_check prometheus_alerts_test
  PROPERTIES LABELS "unit;metrics" TIMEOUT 60 SKIP_RETURN_CODE 77)
add_test(NAME grafana_dashboard_check
  COMMAND ${TESSERA_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/grafana_dashboard_check.py
          ${PROJECT_SOURCE_DIR})
set_tests_properties(grafana_dashboard_check PROPERTIES LABELS "unit;metrics" TIMEOUT 60)

# A real Prometheus on loopback scrapes a running tesserad at TP 2 under a short load; every
# metric, dashboard query and alert condition must return data, and every metric the load
# should move must have moved. Skips (77) until tesserad is built.
set(scrape_test ${CMAKE_CURRENT_LIST_DIR}/../integration/prometheus_scrape_test.py)
if(TARGET tesserad)
  set(tesserad_path $<TARGET_FILE:tesserad>)
else()
  set(tesserad_path ${CMAKE_BINARY_DIR}/controller/tesserad)
endif()
# Debian's python3 where it is: its python3-grpcio sends the gRPC part of the traffic.
if(EXISTS /usr/bin/python3)
  set(scrape_python /usr/bin/python3)
else()
  set(scrape_python ${TESSERA_PYTHON3})
endif()
add_test(NAME prometheus_scrape_test
  COMMAND ${scrape_python} ${scrape_test} --tesserad ${tesserad_path}
          --source-dir ${PROJECT_SOURCE_DIR} -- --tp 2 --threads-per-worker 1)
set_tests_properties(prometheus_scrape_test PROPERTIES
  LABELS "integration;metrics" TIMEOUT 120 SKIP_RETURN_CODE 77)

# The same script against a stand-in daemon that serves a populated ServingMetrics, so the
# script, the dashboard and the alerts are exercised by a real Prometheus today.
if(TARGET tessera_metrics)
  add_executable(metrics_exposition_dump
    ${CMAKE_CURRENT_LIST_DIR}/../integration/metrics_exposition_dump.cc)
  target_compile_options(metrics_exposition_dump PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(metrics_exposition_dump PRIVATE tessera_metrics)
  add_test(NAME prometheus_scrape_selftest
    COMMAND ${TESSERA_PYTHON3} ${scrape_test}
            --tesserad ${CMAKE_CURRENT_LIST_DIR}/../integration/fake_tesserad.py
            --source-dir ${PROJECT_SOURCE_DIR} --static-target
            -- --metrics-command $<TARGET_FILE:metrics_exposition_dump>)
  set_tests_properties(prometheus_scrape_selftest PROPERTIES
    LABELS "integration;metrics" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
