# The CPU executor against llama.cpp's logits for every dense conformance case.
if(TARGET tessera_executor AND TARGET tessera_comm)
  tessera_test(executor_conformance_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/executor_conformance_test.cc
    DEPS tessera_executor tessera_comm nlohmann_json::nlohmann_json
    LABELS conformance
    TIMEOUT 600)
  set_tests_properties(executor_conformance_test PROPERTIES RESOURCE_LOCK gloo_loopback)  # tp.cmake
endif()
