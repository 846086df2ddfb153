# REST gateway (controller/http): the OpenAI protocol field by field and the HTTP server's
# limits, keep-alive, drain, disconnect -> cancel and 1,000 idle SSE connections, over a
# scripted test engine (tests/support/scripted_engine.h).
if(TARGET tessera_http)
  tessera_test(openai_gateway_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/openai_gateway_test.cc
    DEPS tessera_http tessera_grammar
    LABELS unit http
    TIMEOUT 120)
  # Also under ASan/UBSan (label sanitize): connection lifetimes are the risky part.
  tessera_test(http_server_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/http_server_test.cc
    DEPS tessera_http tessera_util
    LABELS unit http sanitize
    TIMEOUT 120)
endif()
