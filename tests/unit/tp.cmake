# Tensor parallelism: the executor split over ranks (threads + real Gloo) against one rank.
if(TARGET tessera_executor AND TARGET tessera_comm)
  tessera_test(tp_executor_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/tp_executor_test.cc
    DEPS tessera_executor tessera_comm tessera_model
    TIMEOUT 600)
endif()
if(TARGET tessera_comm)
  tessera_test(comm_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/comm_test.cc
    DEPS tessera_comm tessera_util
    TIMEOUT 120)
endif()
