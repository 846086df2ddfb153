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
  DEPS tessera_chat tessera_tokenizer nlohmann_json::nlohmann_json
  LABELS chat unit sanitize
  TIMEOUT 60)
# Forced tool calls (common/chat/tool_call_grammar): random sentences of each format's grammar
# parse back as calls of the allowed functions with arguments that satisfy their schemas.
tessera_test(chat_tool_call_grammar_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/chat_tool_call_grammar_test.cc
  DEPS tessera_chat tessera_grammar nlohmann_json::nlohmann_json
  LABELS chat grammar unit sanitize
  TIMEOUT 120)
# The same grammars against independent truth: `tessera grammar --tools --sample` read back by
# a Python parser of each format and validated with python3-jsonschema. Skips (77) without it.
add_test(NAME chat_tool_call_grammar_validate
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/chat_tool_call_grammar_validate.py
          --tessera $<TARGET_FILE:tessera>)
set_tests_properties(chat_tool_call_grammar_validate PROPERTIES
  LABELS "unit;chat;grammar" TIMEOUT 180 SKIP_RETURN_CODE 77)
