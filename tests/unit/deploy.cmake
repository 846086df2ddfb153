# deploy/: shellcheck on every script, systemd-analyze on the unit, the structure of
# deploy.sh --dry-run (CPU and GPU), and the unit's stop timeout against drain-timeout.
if(TARGET tessera_config)
  tessera_test(deploy_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/deploy_test.cc
    DEPS tessera_config
    TIMEOUT 120)
endif()
