// The SIMT emulator's scheduler (simt.h): grids of blocks on host threads, blocks of threads
// as fibers switched at barriers and shuffles.
#include "kernels/cuda/simt/simt.h"

#include <sys/mman.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TESSERA_SIMT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TESSERA_SIMT_ASAN 1
#endif
#ifdef TESSERA_SIMT_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/emu/emu_runtime.h"

namespace tessera::simt {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kMaxThreads = 1024;
constexpr size_t kStackBytes = 128 << 10;  // per thread; a guard page below each

Order OrderFromEnvironment() {
  const char* v = std::getenv("TESSERA_SIMT_ORDER");
  return v != nullptr && std::string(v) == "reverse" ? Order::kReverse : Order::kForward;
}

std::atomic<Order> order{OrderFromEnvironment()};
std::atomic<int64_t> launches{0};

[[noreturn]] void Fatal(const std::string& what) {
  std::fprintf(stderr, "simt: %s\n", what.c_str());
  std::abort();
}

}  // namespace
}  // namespace tessera::simt

// Fiber switches: glibc's swapcontext makes a system call each time (the signal mask), which
// made barrier-heavy kernels spend most of their time in the kernel. This saves the
// callee-saved registers on the current stack, stores the stack pointer to *from and
// continues on `to` (x86-64 System V). The floating-point control words are not switched:
// kernels never change them, so every fiber runs with its host thread's.
extern "C" void tessera_simt_switch(void** from, void* to);
asm(R"(
    .text
    .globl tessera_simt_switch
    .type tessera_simt_switch, @function
tessera_simt_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tessera_simt_switch, .-tessera_simt_switch
)");

namespace tessera::simt {
namespace {

static_assert(sizeof(void*) == 8, "the fiber switch is x86-64 code");

// Where a fiber stands: running (or ready to), waiting at a barrier, or returned.
enum class Wait { kNone, kBlock, kWarp, kDone };

struct Fiber {
  void* sp = nullptr;     // saved stack pointer while not running
  char* stack = nullptr;  // the lowest address of its stack (kStackBytes)
  uint3 thread;
  Wait wait = Wait::kNone;
  unsigned shuffles = 0;  // this lane's shuffles so far: their parity picks the exchange half
};

// Fiber stacks of one host thread, reused by every block it runs.
class Stacks {
 public:
  ~Stacks() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  char* Get(unsigned i) {
    if (i >= count_) Grow(kMaxThreads);
    return base_ + static_cast<size_t>(i) * Stride() + Page();
  }

 private:
  static size_t Page() {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return page;
  }
  static size_t Stride() { return kStackBytes + Page(); }
  void Grow(unsigned count) {
    bytes_ = count * Stride();
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) Fatal("cannot map fiber stacks");
    base_ = static_cast<char*>(p);
    for (unsigned i = 0; i < count; ++i) mprotect(base_ + i * Stride(), Page(), PROT_NONE);
    count_ = count;
  }
  char* base_ = nullptr;
  size_t bytes_ = 0;
  unsigned count_ = 0;
};

// One block being run by this host thread.
struct Block {
  const Launch* launch = nullptr;
  uint3 index;
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  std::vector<uint64_t> exchange;  // two halves of kWarp slots per warp, for shuffles
  void* scheduler = nullptr;       // the scheduler's stack pointer while a fiber runs
};

struct HostThread {
  Stacks stacks;
  // The block's dynamic shared memory, allocated at its exact size so that AddressSanitizer
  // (the sanitize build) reports a kernel that reads or writes past it.
  std::unique_ptr<unsigned char[]> shared;
  size_t shared_bytes = 0;
  Block block;
};

std::string Where(const Block& b, unsigned i) {
  const uint3 th = b.fibers[i].thread;
  return "block (" + std::to_string(b.index.x) + "," + std::to_string(b.index.y) + "," +
         std::to_string(b.index.z) + ") thread (" + std::to_string(th.x) + "," +
         std::to_string(th.y) + "," + std::to_string(th.z) + ")";
}

[[noreturn]] void FatalReturnedLane(const Block& b, unsigned i) {
  Fatal(Where(b, i) +
        " returned while its warp waits for it at __syncwarp or a shuffle (a "
        "full-warp mask names every lane)");
}

HostThread& This() {
  thread_local HostThread t;
  return t;
}

// The running fiber and its block (plain pointers: no initialization guard on the hot path).
thread_local Fiber* running = nullptr;
thread_local Block* running_block = nullptr;

Fiber& Current() {
  if (running == nullptr) Fatal("a device function was called outside a kernel");
  return *running;
}

#ifdef TESSERA_SIMT_ASAN
// The host thread's own stack (where the scheduler runs), as AddressSanitizer reports it when
// a fiber first starts.
thread_local const void* host_stack = nullptr;
thread_local size_t host_stack_bytes = 0;
#endif

// Saves the current context's stack pointer to *from and continues at `to`, a stack whose
// lowest address is `bottom` (AddressSanitizer is told of the switch: `exiting` when the
// current fiber never resumes).
void Switch(void** from, void* to, const void* bottom, size_t bytes, bool exiting = false) {
#ifdef TESSERA_SIMT_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(exiting ? nullptr : &fake_stack, bottom, bytes);
  tessera_simt_switch(from, to);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  (void)bottom, (void)bytes, (void)exiting;
  tessera_simt_switch(from, to);
#endif
}

// Continues fiber `to` of the running block, saving the current one.
void SwitchTo(Fiber& from, Fiber& to) {
  running = &to;
  Switch(&from.sp, to.sp, to.stack, kStackBytes);
}

void ToScheduler(Fiber& f, bool exiting = false) {
#ifdef TESSERA_SIMT_ASAN
  Switch(&f.sp, running_block->scheduler, host_stack, host_stack_bytes, exiting);
#else
  Switch(&f.sp, running_block->scheduler, nullptr, 0, exiting);
#endif
}

bool Reverse();

// Waits at the block's barrier: back to the scheduler, which releases the block once every
// thread that has not returned waits there.
void WaitForBlock() {
  Fiber& f = Current();
  f.wait = Wait::kBlock;
  ToScheduler(f);
}

// Waits at the warp's barrier. Lanes pass control along the warp in schedule order; the last
// to arrive releases the warp and continues its first lane, so a warp runs from one warp
// barrier to the next without the scheduler. Only a warp whose lanes wait at different
// barriers goes back to it (which then reports the deadlock).
void WaitForWarp() {
  Fiber& f = Current();
  f.wait = Wait::kWarp;
  Block& b = *running_block;
  const unsigned n = static_cast<unsigned>(b.fibers.size());
  const unsigned i = static_cast<unsigned>(&f - b.fibers.data());
  const unsigned w0 = i - i % kWarp, w1 = std::min(n, w0 + kWarp);
  const bool reverse = Reverse();
  // The next lane of the warp in schedule order that may run.
  for (unsigned k = 1; k < w1 - w0; ++k) {
    const unsigned lane = reverse ? (i - w0 + (w1 - w0) - k) % (w1 - w0) : (i - w0 + k) % (w1 - w0);
    Fiber& next = b.fibers[w0 + lane];
    if (next.wait == Wait::kNone) {
      SwitchTo(f, next);
      return;
    }
  }
  bool ready = true;
  for (unsigned j = w0; j < w1; ++j) {
    ready &= b.fibers[j].wait == Wait::kWarp || b.fibers[j].wait == Wait::kDone;
  }
  if (!ready) {
    ToScheduler(f);
    return;
  }
  for (unsigned j = w0; j < w1; ++j) {
    if (b.fibers[j].wait == Wait::kDone) FatalReturnedLane(b, j);
  }
  for (unsigned j = w0; j < w1; ++j) b.fibers[j].wait = Wait::kNone;
  Fiber& first = b.fibers[reverse ? w1 - 1 : w0];
  if (&first != &f) SwitchTo(f, first);
}

// Where every fiber starts (from tessera_simt_switch's `ret`); never returns.
[[noreturn]] void FiberEntry() {
#ifdef TESSERA_SIMT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &host_stack, &host_stack_bytes);
#endif
  (*running_block->body)();
  Fiber& f = *running;
  f.wait = Wait::kDone;
  ToScheduler(f, /*exiting=*/true);
  Fatal("a returned fiber was resumed");
}

// A stack on which tessera_simt_switch starts FiberEntry: the six callee-saved registers (0),
// FiberEntry as the return address, and below the top a null return address for FiberEntry
// itself (so that it starts with the stack alignment of a called function).
void* FreshStack(char* stack) {
#ifdef TESSERA_SIMT_ASAN
  // The previous block's frames left their redzones in the shadow memory.
  ASAN_UNPOISON_MEMORY_REGION(stack, kStackBytes);
#endif
  auto* top = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack) + kStackBytes) &
                                          ~uintptr_t{15});
  uint64_t* sp = top - 8;
  std::memset(sp, 0, 8 * sizeof(uint64_t));
  sp[6] = reinterpret_cast<uint64_t>(&FiberEntry);
  return sp;
}

// Releases the fibers that may go on; false when none may (a deadlock).
bool Release(Block& b) {
  const unsigned n = static_cast<unsigned>(b.fibers.size());
  bool released = false;
  for (unsigned w0 = 0; w0 < n; w0 += kWarp) {
    const unsigned w1 = std::min(n, w0 + kWarp);
    bool all = true, any = false, returned = false;
    for (unsigned i = w0; i < w1; ++i) {
      const Wait w = b.fibers[i].wait;
      any |= w == Wait::kWarp;
      returned |= w == Wait::kDone;
      all &= w == Wait::kWarp || w == Wait::kDone;
    }
    if (!any || !all) continue;
    if (returned) {
      for (unsigned i = w0; i < w1; ++i) {
        if (b.fibers[i].wait == Wait::kDone) FatalReturnedLane(b, i);
      }
    }
    for (unsigned i = w0; i < w1; ++i) b.fibers[i].wait = Wait::kNone;
    released = true;
  }
  if (released) return true;
  bool all_block = true;
  for (const Fiber& f : b.fibers) all_block &= f.wait == Wait::kBlock || f.wait == Wait::kDone;
  if (!all_block) return false;
  for (Fiber& f : b.fibers) {
    if (f.wait == Wait::kBlock) f.wait = Wait::kNone;
  }
  return true;
}

void RunBlock(const Launch& launch, uint3 index, const std::function<void()>& body) {
  HostThread& t = This();
  Block& b = t.block;
  running_block = &b;
  b.launch = &launch;
  b.index = index;
  b.body = &body;
  const dim3 d = launch.block;
  const unsigned n = d.x * d.y * d.z;
  b.fibers.assign(n, Fiber{});
  b.exchange.assign((n + kWarp - 1) / kWarp * 2 * kWarp, 0);
  if (t.shared == nullptr || t.shared_bytes != launch.shared_bytes) {
    t.shared.reset(new unsigned char[launch.shared_bytes == 0 ? 1 : launch.shared_bytes]);
    t.shared_bytes = launch.shared_bytes;
  }
  std::memset(t.shared.get(), 0xff, launch.shared_bytes);
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = b.fibers[i];
    f.thread = uint3{i % d.x, i / d.x % d.y, i / (d.x * d.y)};
    f.stack = t.stacks.Get(i);
    f.sp = FreshStack(f.stack);
  }
  const bool reverse = Reverse();
  for (unsigned done = 0; done < n;) {
    for (unsigned k = 0; k < n; ++k) {
      const unsigned i = reverse ? n - 1 - k : k;
      Fiber& f = b.fibers[i];
      if (f.wait != Wait::kNone) continue;
      running = &f;
      Switch(&b.scheduler, f.sp, f.stack, kStackBytes);
      running = nullptr;
    }
    // A warp released by its last lane may stop at __syncthreads in one lane while others
    // the sweep has passed are still to run: sweep again before releasing anything.
    done = 0;
    bool runnable = false;
    for (const Fiber& f : b.fibers) {
      done += f.wait == Wait::kDone;
      runnable |= f.wait == Wait::kNone;
    }
    if (runnable) continue;
    if (done < n && !Release(b)) {
      std::string waits;
      for (unsigned i = 0; i < n && waits.size() < 400; ++i) {
        const Wait w = b.fibers[i].wait;
        if (w == Wait::kDone) continue;
        waits +=
            "\n  " + Where(b, i) + (w == Wait::kBlock ? " at __syncthreads" : " at a warp sync");
      }
      Fatal("deadlock: the block's threads wait at different barriers:" + waits);
    }
  }
}

// Runs the blocks of one grid on this thread, from a shared counter.
void RunBlocks(const Launch& launch, const std::function<void()>& body,
               std::atomic<uint64_t>& next) {
  const dim3 g = launch.grid;
  const uint64_t total = uint64_t{g.x} * g.y * g.z;
  for (uint64_t i = next++; i < total; i = next++) {
    RunBlock(launch,
             uint3{static_cast<unsigned>(i % g.x), static_cast<unsigned>(i / g.x % g.y),
                   static_cast<unsigned>(i / (uint64_t{g.x} * g.y))},
             body);
  }
}

// Host threads that help run grids (one grid at a time; a launch that finds them busy runs on
// its own thread).
class Pool {
 public:
  Pool() {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 1; i < std::min(hw, 8u); ++i) workers_.emplace_back([this] { Work(); });
  }

  void Run(const Launch& launch, const std::function<void()>& body) {
    std::atomic<uint64_t> next{0};
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock() || workers_.empty()) {
      RunBlocks(launch, body, next);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = Job{&launch, &body, &next};
      ++generation_;
      running_ = static_cast<int>(workers_.size());
    }
    wake_.notify_all();
    RunBlocks(launch, body, next);
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [this] { return running_ == 0; });
  }

 private:
  struct Job {
    const Launch* launch = nullptr;
    const std::function<void()>* body = nullptr;
    std::atomic<uint64_t>* next = nullptr;
  };

  void Work() {
    uint64_t seen = 0;
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        job = job_;
      }
      RunBlocks(*job.launch, *job.body, *job.next);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--running_ == 0) finished_.notify_all();
    }
  }

  std::mutex busy_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  Job job_;
  uint64_t generation_ = 0;
  int running_ = 0;
  std::vector<std::thread> workers_;
};

Pool& ThePool() {
  static auto* pool = new Pool;  // its threads live as long as the process
  return *pool;
}

cudaError_t Check(const Launch& l) {
  const dim3 b = l.block, g = l.grid;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (threads == 0 || threads > kMaxThreads || b.z > 64) return cudaErrorInvalidConfiguration;
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 0x7fffffffu || g.y > 65535 || g.z > 65535) {
    return cudaErrorInvalidConfiguration;
  }
  // 48 KiB, or what cudaFuncSetAttribute allowed the kernel (the emulated device's opt-in).
  if (l.shared_bytes > tessera::cuda::emu::MaxDynamicShared(l.kernel)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

void SetOrder(Order o) { order = o; }
Order CurrentOrder() { return order; }
int64_t Launches() { return launches; }

const uint3& ThreadIdx() { return Current().thread; }
const uint3& BlockIdx() {
  Current();
  return running_block->index;
}
const dim3& BlockDim() {
  Current();
  return running_block->launch->block;
}
const dim3& GridDim() {
  Current();
  return running_block->launch->grid;
}

void SyncThreads() { WaitForBlock(); }

void SyncWarp(unsigned mask) {
  if (mask != 0xffffffffu) Fatal("__syncwarp with a partial mask is not emulated");
  WaitForWarp();
}

uint64_t ShuffleXor(unsigned mask, uint64_t bits, int lane_mask, int width) {
  if (mask != 0xffffffffu) Fatal("__shfl_xor_sync with a partial mask is not emulated");
  Fiber& f = Current();
  Block& b = *running_block;
  const unsigned i = static_cast<unsigned>(&f - b.fibers.data());
  const unsigned lane = i % kWarp;
  // Consecutive shuffles use alternate halves: a lane that has read may write its next value
  // while slower lanes still read this one, and none writes this half again before every
  // lane has passed the next shuffle's barrier, after its read here.
  uint64_t* slots = b.exchange.data() + (i - lane) * 2 + (f.shuffles++ % 2) * kWarp;
  slots[lane] = bits;
  WaitForWarp();  // every lane has written its value
  unsigned from = lane ^ static_cast<unsigned>(lane_mask);
  // Lanes outside this lane's segment of `width` read their own value (as CUDA does).
  if (from / static_cast<unsigned>(width) != lane / static_cast<unsigned>(width)) from = lane;
  if (i - lane + from >= b.fibers.size()) from = lane;  // a lane the block does not have
  return slots[from];
}

void* DynamicShared() {
  Current();
  return This().shared.get();
}

namespace {
bool Reverse() { return order.load(std::memory_order_relaxed) == Order::kReverse; }
}  // namespace

void Run(const Launch& launch, std::function<void()> thread_body) {
  if (cudaError_t e = Check(launch); e != cudaSuccess) {
    cuda::emu::SetLastError(e);
    return;
  }
  ++launches;
  cuda::emu::Launch(launch.stream,
                    [launch, body = std::move(thread_body)] { ThePool().Run(launch, body); });
}

}  // namespace tessera::simt
