# The LXC deployment end to end in a real container (tests/deploy/lxc_e2e.sh): deploy.sh with
# this build's binaries, then what an operator checks. Skipped (exit 77, with the reason)
# where the host cannot run LXC system containers; about 2-5 minutes where it can.
if(TARGET tesserad AND TARGET tessera-worker AND TARGET tessera)
  add_test(NAME lxc_e2e_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/lxc_e2e.sh $<TARGET_FILE_DIR:tesserad>)
  set_tests_properties(lxc_e2e_test PROPERTIES
    LABELS "deploy" TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
