// Time stamps that several processes on one host can compare: std::chrono::steady_clock is
// CLOCK_MONOTONIC in libstdc++, one clock for every process since boot.
#pragma once

#include <chrono>
#include <cstdint>

namespace tessera {

// `t` in nanoseconds of CLOCK_MONOTONIC.
inline int64_t MonotonicNanos(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace tessera
