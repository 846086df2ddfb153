# tesserad configuration (controller/config): option table, YAML + flags, docs, examples.
if(TARGET tessera_config)
  tessera_test(config_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/config_test.cc
    DEPS tessera_config
    LABELS sanitize
    TIMEOUT 60)
endif()
