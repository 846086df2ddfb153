# Chat templates against renders by Python's Jinja2 (as HuggingFace renders them).
tessera_test(chat_conformance_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_conformance_test.cc
  DEPS tessera_chat nlohmann_json::nlohmann_json
  LABELS conformance chat
  TIMEOUT 60)
