# Token sampling (worker/sampling): hand-derived cases, penalty formulas, seeded frequency
# tests against a double softmax, and the documented draw rule replayed.
tessera_test(sampling_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/sampling_test.cc
  DEPS tessera_sampling
  LABELS unit sampling sanitize
  TIMEOUT 60)
