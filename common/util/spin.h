// Spin-waiting done politely: a CPU hint for the loop body, and a policy that says whether
// polling pays at all for the calling thread.
#pragma once

#include <sched.h>
#include <sys/resource.h>

#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera {

// Inside a spin-wait loop: on x86 `pause`, which lets the sibling hyperthread run and keeps
// the loop from flooding the memory pipeline; nothing elsewhere.
inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Polls `ready` until it holds or `window` passes, giving the core away (sched_yield)
// between polls; true when `ready` held. For a wait that should end within microseconds of
// a hand-off: a thread that sleeps instead lets its core go idle, and on a virtual machine
// waking an idle vCPU for the answer takes tens of microseconds (an exit to the
// hypervisor); a thread polling this way keeps the core awake, yet anything runnable runs
// first, so it costs other work nothing.
template <typename Ready>
bool YieldingPoll(Ready&& ready, std::chrono::nanoseconds window) {
  const auto deadline = std::chrono::steady_clock::now() + window;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    sched_yield();
  }
  return true;
}

// Whether a thread should poll before it sleeps: not while the OS keeps preempting it (more
// involuntary context switches than kMaxPreemptionsPerSecond over the last
// kPreemptionWindow), which means other threads want its core and polling would take the
// core from whoever runs the work it waits for. One per thread (it reads the calling
// thread's counters).
class SpinPolicy {
 public:
  bool Spin() {
    const auto now = Clock::now();
    if (now - window_start_ >= kPreemptionWindow) {
      const long switches = InvoluntarySwitches();
      const double seconds = std::chrono::duration<double>(now - window_start_).count();
      spin_ = (switches - switches_) / seconds <= kMaxPreemptionsPerSecond;
      switches_ = switches;
      window_start_ = now;
    }
    return spin_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kPreemptionWindow = std::chrono::milliseconds(50);
  static constexpr double kMaxPreemptionsPerSecond = 200;
  static long InvoluntarySwitches() {
    rusage u{};
    if (getrusage(RUSAGE_THREAD, &u) != 0) return 0;
    return u.ru_nivcsw;
  }
  Clock::time_point window_start_ = Clock::now();
  long switches_ = InvoluntarySwitches();
  bool spin_ = true;
};

}  // namespace tessera
