# Tensor parallelism: the executor split over ranks (threads + real Gloo) against one rank.
if(TARGET tessera_executor AND TARGET tessera_comm)
  tessera_test(tp_executor_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/tp_executor_test.cc
    DEPS tessera_executor tessera_comm tessera_model
    TIMEOUT 600)
  # The tests whose ranks rendezvous over Gloo on loopback ports run one at a time: a fresh
  # clone's `ctest -j 2` once saw a rendezvous fail with "Connection closed by peer" while
  # two of them ran side by side.
  set_tests_properties(tp_executor_test PROPERTIES RESOURCE_LOCK gloo_loopback)
endif()
if(TARGET tessera_comm)
  tessera_test(comm_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/comm_test.cc
    DEPS tessera_comm tessera_util
    TIMEOUT 120)
  set_tests_properties(comm_test PROPERTIES RESOURCE_LOCK gloo_loopback)
endif()
