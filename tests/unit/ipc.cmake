# The shared-memory step channel (common/ipc): mailboxes in one process, an echo through a
# forked process that maps the channel from its descriptor, and what Attach refuses.
if(TARGET tessera_ipc)
  tessera_test(shm_channel_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_channel_test.cc
    DEPS tessera_ipc
    LABELS unit sanitize
    TIMEOUT 60)
endif()
# Collectives through shared memory (common/ipc): forked ranks against independently
# computed results, a rank that never arrives, what Attach refuses.
if(TARGET tessera_ipc)
  tessera_test(shm_collectives_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/shm_collectives_test.cc
    DEPS tessera_ipc
    LABELS unit sanitize
    TIMEOUT 120)
endif()
