# Token sampling (worker/sampling): hand-derived cases, penalty formulas, seeded frequency
# tests against a double softmax, and the documented draw rule replayed.
tessera_test(sampling_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/sampling_test.cc
  DEPS tessera_sampling
  LABELS unit sampling sanitize
  TIMEOUT 60)
# Speculative decoding's drafts and verification: n-gram lookup and greedy verification by
# hand; sampled verification keeps the target's distribution (chi-square at p = 0.001 over
# 20,000 generations, and the same test rejects plain acceptance).
tessera_test(speculative_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/speculative_test.cc
  DEPS tessera_sampling
  LABELS unit sampling sanitize
  TIMEOUT 60)
