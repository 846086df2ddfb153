# Chat templates: the Jinja2 engine (common/chat) and the built-in templates. The engine
# parses templates taken from model files, so its tests also run under ASan/UBSan.
tessera_test(chat_value_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_value_test.cc
  DEPS tessera_chat
  LABELS chat sanitize
  TIMEOUT 60)
tessera_test(chat_engine_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_engine_test.cc
  DEPS tessera_chat absl::strings
  LABELS chat sanitize
  TIMEOUT 60)
tessera_test(chat_jinja2_parity_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_jinja2_parity_test.cc
  DEPS tessera_chat
  LABELS chat sanitize
  TIMEOUT 60)
tessera_test(chat_builtin_templates_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_builtin_templates_test.cc
  DEPS tessera_chat
  LABELS chat sanitize
  TIMEOUT 60)
if(TARGET tessera_cli)
  tessera_test(chat_template_command_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_template_command_test.cc
    DEPS tessera_cli
    LABELS chat
    TIMEOUT 60)
endif()
# Provenance: which bytes of a rendered prompt came from the request (RenderTracked), and
# that tokenizing with those bytes as plain text stops request text forging control tokens
# in every conformance template.
tessera_test(chat_provenance_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_provenance_test.cc
  DEPS tessera_chat nlohmann_json::nlohmann_json
  LABELS chat unit sanitize
  TIMEOUT 60)
tessera_test(chat_prompt_injection_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_prompt_injection_test.cc
  DEPS tessera_chat tessera_tokenizer nlohmann_json::nlohmann_json
  LABELS chat tokenizer unit sanitize
  TIMEOUT 60)
# Tool calls and reasoning in model output (common/chat/tool_calls): round trips through every
# conformance template that writes tool calls, and the streaming parser's edge cases.
tessera_test(chat_tool_calls_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_tool_calls_test.cc
  DEPS tessera_chat nlohmann_json::nlohmann_json
  LABELS chat unit sanitize
  TIMEOUT 60)
