# Warnings are errors for Tessera's own code (not for generated code or third-party headers).
set(TESSERA_WARNINGS -Wall -Wextra -Wpedantic -Werror -Wno-unused-parameter)

# tessera_library(NAME SOURCES ... [DEPS ...]): a static library of our own code.
function(tessera_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${TESSERA_WARNINGS}>
                                         $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# tessera_test(NAME SOURCES ... [DEPS ...] [LABELS ...] [TIMEOUT s] [ARGS ...]): a GoogleTest
# binary registered with ctest (run with ARGS); the conformance directory is passed as
# TESSERA_SHARED_DIR.
function(tessera_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${TESSERA_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name} ${ARG_ARGS})
  if("gpu" IN_LIST ARG_LABELS)
    # Reported by ctest as skipped (not passed) on machines without a GPU.
    set_tests_properties(${name} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endif()
  if("sanitize" IN_LIST ARG_LABELS OR "fuzz" IN_LIST ARG_LABELS)
    add_dependencies(sanitize_tests ${name})
  endif()
  set_tests_properties(${name} PROPERTIES
    TIMEOUT ${ARG_TIMEOUT}
    LABELS "${ARG_LABELS}"
    ENVIRONMENT "TESSERA_SHARED_DIR=${TESSERA_SHARED_DIR};TESSERA_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
