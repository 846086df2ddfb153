# The NextN/MTP draft head: loading (and the errors of models without the block), validate's
# report, and its logits against the conformance vectors (CPU, exact and fast paths, TP 2).
if(TARGET tessera_executor AND TARGET tessera_comm)
  tessera_test(mtp_conformance_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/mtp_conformance_test.cc
    DEPS tessera_executor tessera_comm tessera_model nlohmann_json::nlohmann_json
    LABELS conformance
    TIMEOUT 600)
endif()
if(TARGET tessera_executor AND TARGET tessera_cli)
  tessera_test(mtp_load_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/mtp_load_test.cc
    DEPS tessera_executor tessera_model tessera_cli nlohmann_json::nlohmann_json)
endif()
