# Real clients against the real daemon: tesserad (with its tessera-worker) on ephemeral ports,
# started and stopped (SIGTERM: drained, exit 0) by tesserad_harness.py. The client tests are
# the ones openai.cmake and grpc_api.cmake run against the test servers; here they check
# shapes, usage, streaming and error bodies of a random-weight model instead of echo text.
# tesserad_api_test.py adds what needs the daemon itself: 64 concurrent streams equal to the
# same requests alone, disconnect frees KV blocks, 429 / 400 / 401, SIGTERM drain, 200
# high-temperature requests without a 5xx.
if(TARGET tesserad AND TARGET tessera-worker AND TARGET tessera)
  # Debian's interpreter, where python3-grpcio is installed (not a pyenv or venv one).
  find_program(TESSERA_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(TESSERA_SYSTEM_PYTHON3)
    set(tessera_daemon_harness ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tesserad_harness.py
                --tesserad $<TARGET_FILE:tesserad> --worker $<TARGET_FILE:tessera-worker>
                --api-key sk-tesserad-client-test)

    # 77: node or the openai npm package is missing (`npm ci --prefix tests/clients`). The
    # runner starts tesserad through the harness (its worker: the tessera-worker beside it).
    add_test(NAME tesserad_openai_sdk_test
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_openai_sdk_test.sh
                     --daemon $<TARGET_FILE:tesserad> --api-key sk-tesserad-client-test)
    set_tests_properties(tesserad_openai_sdk_test PROPERTIES
      LABELS "clients;http;daemon" TIMEOUT 180 SKIP_RETURN_CODE 77)

    # Structured output through the OpenAI SDK: 100 json_schema requests at temperature 1.0
    # validated by Ajv, JSON mode, regex / choice / GBNF extensions, 400s for bad constraints.
    add_test(NAME tesserad_structured_output_test
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_openai_sdk_test.sh
                     --daemon $<TARGET_FILE:tesserad> --api-key sk-tesserad-client-test
                     --test structured_output_test.mjs)
    set_tests_properties(tesserad_structured_output_test PROPERTIES
      LABELS "clients;http;daemon;grammar" TIMEOUT 600 SKIP_RETURN_CODE 77)

    # Tool calls through the OpenAI SDK (the built-in GLM template: glm45 calls): named and
    # required forced calls at temperature 1.0 validated by Ajv, streamed through the SDK's
    # stream helper and not; tool results sent back; 200 "auto" requests without a 5xx. Then
    # a template that opens <think>: reasoning_content and reasoning_tokens.
    add_test(NAME tesserad_tool_calls_test
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_openai_sdk_test.sh
                     --daemon $<TARGET_FILE:tesserad> --api-key sk-tesserad-client-test
                     --daemon-arg --chat-template --daemon-arg glm4
                     --test tool_calls_test.mjs)
    set_tests_properties(tesserad_tool_calls_test PROPERTIES
      LABELS "clients;http;daemon;grammar" TIMEOUT 600 SKIP_RETURN_CODE 77
      ENVIRONMENT "TESSERA_TOOL_TEST=tools")
    add_test(NAME tesserad_reasoning_test
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_openai_sdk_test.sh
                     --daemon $<TARGET_FILE:tesserad> --api-key sk-tesserad-client-test
                     --daemon-arg --chat-template
                     --daemon-arg ${CMAKE_CURRENT_LIST_DIR}/think_template.jinja
                     --test tool_calls_test.mjs)
    set_tests_properties(tesserad_reasoning_test PROPERTIES
      LABELS "clients;http;daemon" TIMEOUT 180 SKIP_RETURN_CODE 77
      ENVIRONMENT "TESSERA_TOOL_TEST=reasoning")

    # Speculative decoding through real worker processes: --speculative ngram returns the
    # same tokens and logprobs as without, 32 concurrent greedy / seeded requests, at TP 1
    # and 2.
    add_test(NAME tesserad_speculative_test
             COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tesserad_speculative_test.py
                     --tesserad $<TARGET_FILE:tesserad> --worker $<TARGET_FILE:tessera-worker>
                     --tessera $<TARGET_FILE:tessera>)
    set_tests_properties(tesserad_speculative_test PROPERTIES
      LABELS "clients;http;daemon" TIMEOUT 180)
    add_test(NAME tesserad_speculative_tp2_test
             COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tesserad_speculative_test.py
                     --tesserad $<TARGET_FILE:tesserad> --worker $<TARGET_FILE:tessera-worker>
                     --tessera $<TARGET_FILE:tessera> --tp 2)
    set_tests_properties(tesserad_speculative_tp2_test PROPERTIES
      LABELS "clients;http;daemon" TIMEOUT 180)
    # The same with the model's MTP head drafting (small glm-dsa), at TP 2: the MTP block
    # runs on both ranks after rank 0's sampled tokens are broadcast.
    add_test(NAME tesserad_speculative_mtp_test
             COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tesserad_speculative_test.py
                     --tesserad $<TARGET_FILE:tesserad> --worker $<TARGET_FILE:tessera-worker>
                     --tessera $<TARGET_FILE:tessera> --mtp --tp 2)
    set_tests_properties(tesserad_speculative_mtp_test PROPERTIES
      LABELS "clients;http;daemon" TIMEOUT 180)

    # 77: python3-grpcio is not installed (tools/install-deps.sh installs it).
    add_test(NAME tesserad_grpc_reflection_client
             COMMAND ${tessera_daemon_harness} -- ${TESSERA_SYSTEM_PYTHON3}
                     ${CMAKE_CURRENT_LIST_DIR}/grpc_reflection_client.py
                     --target {grpc} --api-key {api_key})
    set_tests_properties(tesserad_grpc_reflection_client PROPERTIES
      LABELS "clients;grpc;daemon" TIMEOUT 180 SKIP_RETURN_CODE 77)

    # Tools, tool calls and reasoning in gRPC Chat, from the reflection-only client: with the
    # built-in GLM template (glm45 calls) named and "required" forced calls at temperature 1.0
    # validated by python3-jsonschema, a conversation sending the result back, errors naming
    # the fields, "auto"; then a template that opens <think>: reasoning_content and
    # usage.reasoning_tokens. 77: python3-grpcio or python3-jsonschema is not installed.
    add_test(NAME tesserad_grpc_tool_calls_test
             COMMAND ${tessera_daemon_harness}
                     --daemon-arg=--chat-template --daemon-arg=glm4
                     -- ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/grpc_tool_calls_client.py
                     --target {grpc} --api-key {api_key} --mode tools)
    set_tests_properties(tesserad_grpc_tool_calls_test PROPERTIES
      LABELS "clients;grpc;daemon;grammar" TIMEOUT 300 SKIP_RETURN_CODE 77)
    add_test(NAME tesserad_grpc_reasoning_test
             COMMAND ${tessera_daemon_harness}
                     --daemon-arg=--chat-template
                     --daemon-arg=${CMAKE_CURRENT_LIST_DIR}/think_template.jinja
                     -- ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/grpc_tool_calls_client.py
                     --target {grpc} --api-key {api_key} --mode reasoning)
    set_tests_properties(tesserad_grpc_reasoning_test PROPERTIES
      LABELS "clients;grpc;daemon" TIMEOUT 180 SKIP_RETURN_CODE 77)

    add_test(NAME tesserad_api_test
             COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tesserad_api_test.py
                     --tesserad $<TARGET_FILE:tesserad> --worker $<TARGET_FILE:tessera-worker>
                     --tessera $<TARGET_FILE:tessera>
                     --work-dir ${CMAKE_CURRENT_BINARY_DIR}/tesserad_api_test)
    set_tests_properties(tesserad_api_test PROPERTIES
      LABELS "clients;integration;daemon" TIMEOUT 300)

    # Prefix caching at TP 2 against a daemon without it: numerics, cached_tokens, cache_salt,
    # /reset_prefix_cache and the Prometheus counters.
    add_test(NAME tesserad_prefix_cache_test
             COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tesserad_prefix_cache_test.py
                     --tesserad $<TARGET_FILE:tesserad> --worker $<TARGET_FILE:tessera-worker>
                     --tessera $<TARGET_FILE:tessera>
                     --work-dir ${CMAKE_CURRENT_BINARY_DIR}/tesserad_prefix_cache_test)
    set_tests_properties(tesserad_prefix_cache_test PROPERTIES
      LABELS "clients;integration;daemon" TIMEOUT 240)

    # Requests from an adversarial probe: large chats prepared off the I/O threads, cheap
    # bounds, control tokens in request text, browser safety (Content-Type, Host, CORS, HEAD).
    add_test(NAME tesserad_hardening_test
             COMMAND ${TESSERA_SYSTEM_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/tesserad_hardening_test.py
                     --tesserad $<TARGET_FILE:tesserad> --worker $<TARGET_FILE:tessera-worker>
                     --tessera $<TARGET_FILE:tessera>
                     --work-dir ${CMAKE_CURRENT_BINARY_DIR}/tesserad_hardening_test)
    set_tests_properties(tesserad_hardening_test PROPERTIES
      LABELS "clients;http;daemon" TIMEOUT 240)
  endif()
endif()
