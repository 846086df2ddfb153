# The tree itself: every tracked C++/CUDA/protobuf source is clang-formatted (so CI checks
# formatting), and the README's two commands (./run.sh, ./test.sh) configure one build that
# neither undoes (label `build`: three configures of the project in a scratch directory).
add_test(NAME format_check COMMAND ${PROJECT_SOURCE_DIR}/tools/check-format.sh)
set_tests_properties(format_check PROPERTIES LABELS "unit;lint" TIMEOUT 120
  SKIP_RETURN_CODE 77)
add_test(NAME shared_configure_test
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/shared_configure_test.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(shared_configure_test PROPERTIES LABELS "build" TIMEOUT 300
  SKIP_RETURN_CODE 77)
