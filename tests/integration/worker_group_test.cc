// The worker group with real tessera-worker processes: TP = 1, 2, 4 give the in-process
// logits; steps give the same bits through the shared-memory channel and the stream; each
// rank reads about 1/N of the split tensors; a worker killed with SIGKILL
// fails the step in flight with an error naming it, the group restarts and serves again;
// a rank that never joins times the rendezvous out with an error naming it.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/model/synthetic.h"
#include "common/model/tensor_map.h"
#include "controller/workers/worker_group.h"
#include "gtest/gtest.h"
#include "worker/executor/executor.h"

extern char** environ;

namespace tessera::workers {
namespace {

namespace v1 = tessera::v1;

std::string Synthetic(const std::string& arch, const std::string& quant,
                      const std::string& preset = "small") {
  model::SyntheticOptions o;
  o.arch = arch;
  o.preset = preset;
  o.quant = quant;
  o.seed = 9;
  auto w = model::BuildSyntheticModel(o);
  EXPECT_TRUE(w.ok()) << w.status();
  std::string path =
      absl::StrCat(::testing::TempDir(), "/wg-", arch, "-", preset, "-", quant, ".gguf");
  EXPECT_TRUE(w->WriteFile(path).ok());
  return path;
}

WorkerGroupOptions Options(const std::string& model, int tp) {
  WorkerGroupOptions o;
  o.model_path = model;
  o.world_size = tp;
  o.exact = true;
  o.threads_per_worker = 1;
  o.kv_tokens = 64;
  o.max_restarts = 0;
  o.heartbeat_interval = std::chrono::milliseconds(100);
  o.heartbeat_timeout = std::chrono::milliseconds(3000);
  o.rendezvous_timeout = std::chrono::milliseconds(20000);
  o.log = [](const std::string& line) { std::fprintf(stderr, "[group] %s\n", line.c_str()); };
  return o;
}

v1::StepRequest LogitsStep(const std::vector<int32_t>& tokens, int n_blocks) {
  v1::StepRequest step;
  step.set_step_id(1);
  v1::StepSequence* s = step.add_seqs();
  s->set_seq_id(1);
  for (int32_t t : tokens) s->add_tokens(t);
  for (int b = 0; b < n_blocks; ++b) s->add_block_table(b);
  s->set_return_logits(true);
  return step;
}

std::vector<float> InProcess(const std::string& model, const std::vector<int32_t>& tokens) {
  executor::ExecutorOptions o;
  o.exact = true;
  o.threads = 1;
  o.kv_tokens = 64;
  auto ex = executor::Executor::Create(model, o);
  EXPECT_TRUE(ex.ok()) << ex.status();
  executor::SequenceInput s;
  s.tokens = tokens;
  s.all_logits = true;
  for (int b = 0; b < (*ex)->n_blocks(); ++b) s.block_table.push_back(b);
  auto l = (*ex)->Step({&s, 1});
  EXPECT_TRUE(l.ok());
  return (*l)[0];
}

const std::vector<int32_t> kTokens = {1, 17, 43, 99, 120, 7, 250, 3};

TEST(WorkerGroup, TensorParallelLogitsMatchInProcess) {
  struct Model {
    const char* arch;
    const char* quant;
    const char* preset;
    std::vector<int> tps;
    const char* expert_parallel;
  };
  // The small presets, and shapes that need uneven splits, replicated KV heads and expert
  // parallelism (the "uneven" preset: 8 heads over 2 KV heads, 6 experts of 192) at every
  // size up to 8 worker processes.
  for (const Model& m : {Model{"llama", "F32", "small", {1, 2, 4}, "auto"},
                         Model{"deepseek2", "F32", "small", {1, 2, 4}, "auto"},
                         Model{"llama", "Q8_0", "uneven", {3, 6, 8}, "auto"},
                         Model{"qwen3moe", "Q8_0", "uneven", {3, 4, 6, 8}, "auto"},
                         Model{"qwen3moe", "Q8_0", "uneven", {2, 3}, "on"},
                         Model{"deepseek2", "Q6_K", "uneven", {2, 3}, "auto"},
                         Model{"glm4moe", "Q8_0", "ep-1408", {3}, "auto"},
                         Model{"glm-dsa", "Q8_0", "uneven", {3, 6}, "auto"}}) {
    const std::string model = Synthetic(m.arch, m.quant, m.preset);
    const std::vector<float> want = InProcess(model, kTokens);
    for (int tp : m.tps) {
      SCOPED_TRACE(
          absl::StrCat(m.arch, " ", m.preset, " tp ", tp, " expert parallel ", m.expert_parallel));
      WorkerGroupOptions o = Options(model, tp);
      o.expert_parallel = m.expert_parallel;
      auto g = WorkerGroup::Create(o);
      ASSERT_TRUE(g.ok()) << g.status();
      absl::Status s = (*g)->Start();
      ASSERT_TRUE(s.ok()) << s;
      auto r = (*g)->RunStep(LogitsStep(kTokens, (*g)->n_blocks()));
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->seqs(0).logits_size(), static_cast<int>(want.size()));
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(r->seqs(0).logits(i) - want[i])));
      }
      // Same bound as the in-process TP test (tp_executor_test): reassociated float sums.
      EXPECT_LT(worst, 2e-3);
    }
  }
}

// The kernel's name of each descriptor process `pid` holds ("pipe:[1234]", "/dev/null", ...).
std::vector<std::string> OpenDescriptors(pid_t pid) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/fd"), ec)) {
    std::error_code link_ec;
    out.push_back(std::filesystem::read_symlink(e.path(), link_ec).string());
  }
  return out;
}

// Steps and results take the shared-memory channel (spawned workers), the control stream
// (step_channel_bytes 0), or both (a one-page mailbox: the small steps fit, the logits
// results and a step with 3,000 release ids do not and go by the stream with a marker).
// Each way gives the same bits as the others; StartStep/FinishStep as RunStep.
TEST(WorkerGroup, StepsThroughTheChannelOrTheStreamGiveTheSameBits) {
  const std::string model = Synthetic("llama", "F32");
  auto steps = [](int n_blocks) {
    std::vector<v1::StepRequest> out;
    out.push_back(LogitsStep(kTokens, n_blocks));
    v1::StepRequest decode = LogitsStep({5}, n_blocks);
    decode.set_step_id(2);
    decode.mutable_seqs(0)->set_start_pos(static_cast<int64_t>(kTokens.size()));
    out.push_back(decode);
    v1::StepRequest large = LogitsStep({9, 8}, n_blocks);
    large.set_step_id(3);
    large.mutable_seqs(0)->set_seq_id(2);
    for (int i = 0; i < 3000; ++i) large.add_release_seq_ids(1000 + i);
    out.push_back(large);
    return out;
  };
  // A pipe of the controller's own, inheritable, at the descriptors a worker gets its
  // channel and collectives at (where they are free here): no worker may hold it, whichever
  // of the two it is given.
  int controller_pipe[2];
  ASSERT_EQ(pipe(controller_pipe), 0);
  for (int fd : {3, 4}) {
    if (fcntl(fd, F_GETFD) == -1) {
      ASSERT_EQ(dup2(controller_pipe[0], fd), fd);
    }
  }
  const std::string pipe_name =
      std::filesystem::read_symlink(absl::StrCat("/proc/self/fd/", controller_pipe[0])).string();
  std::vector<std::vector<float>> want;  // per step: rank 0's logits over the stream
  for (size_t bytes : {size_t{0}, size_t{4096}, size_t{4} << 20}) {
    SCOPED_TRACE(absl::StrCat("step_channel_bytes ", bytes));
    WorkerGroupOptions o = Options(model, 2);
    o.step_channel_bytes = bytes;
    auto g = WorkerGroup::Create(o);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE((*g)->Start().ok());
    for (const RankState& r : (*g)->ranks()) {
      EXPECT_EQ(r.step_channel, bytes > 0) << r.rank;
      const std::vector<std::string> held = OpenDescriptors(r.pid);
      EXPECT_FALSE(held.empty()) << r.rank;
      EXPECT_EQ(std::count(held.begin(), held.end(), pipe_name), 0)
          << "rank " << r.rank << " inherited the controller's descriptor " << pipe_name;
    }
    const std::vector<v1::StepRequest> run = steps((*g)->n_blocks());
    for (size_t i = 0; i < run.size(); ++i) {
      absl::StatusOr<v1::StepResult> r;
      if (i % 2 == 0) {
        r = (*g)->RunStep(run[i]);
      } else {
        ASSERT_TRUE((*g)->StartStep(run[i]).ok());
        r = (*g)->FinishStep();
      }
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->step_id(), run[i].step_id());
      ASSERT_EQ(r->seqs_size(), 1);
      std::vector<float> logits(r->seqs(0).logits().begin(), r->seqs(0).logits().end());
      // The one-page mailbox sees each case: the first result (8 rows of logits) and the
      // third step outgrow it, the rest fits.
      if (i == 0) {
        EXPECT_GT(r->ByteSizeLong(), size_t{4096});
      } else if (i == 1) {
        EXPECT_LT(r->ByteSizeLong() + run[i].ByteSizeLong(), size_t{4096});
      } else {
        EXPECT_GT(run[i].ByteSizeLong(), size_t{4096});
      }
      if (bytes == 0) {
        want.push_back(logits);
      } else {
        ASSERT_EQ(logits.size(), want[i].size());
        EXPECT_EQ(std::memcmp(logits.data(), want[i].data(), logits.size() * sizeof(float)), 0)
            << "step " << i;
      }
    }
    // A FinishStep with no step started is an error, not a hang.
    EXPECT_TRUE(absl::IsFailedPrecondition((*g)->FinishStep().status()));
  }
  for (int fd : {3, 4}) {
    if (std::filesystem::read_symlink(absl::StrCat("/proc/self/fd/", fd)).string() == pipe_name) {
      close(fd);
    }
  }
  close(controller_pipe[0]);
  close(controller_pipe[1]);
}

// Spawned CPU ranks run their collectives through one shared memory mapping (the default),
// in rounds of a page (the step's all-reduces and the logits' all-gather then take several),
// or over Gloo's TCP connections (collective_slot_bytes 0). At TP 2 a sum of two values has
// one rounding whichever rank adds first, so every way gives the same bits.
TEST(WorkerGroup, CollectivesThroughSharedMemoryOrGlooGiveTheSameBits) {
  const std::string model = Synthetic("llama", "F32");
  std::vector<std::vector<float>> want;
  for (size_t bytes : {size_t{0}, size_t{4096}, size_t{4} << 20}) {
    SCOPED_TRACE(absl::StrCat("collective_slot_bytes ", bytes));
    WorkerGroupOptions o = Options(model, 2);
    o.collective_slot_bytes = bytes;
    auto g = WorkerGroup::Create(o);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE((*g)->Start().ok());
    for (const RankState& r : (*g)->ranks()) {
      EXPECT_EQ(r.info.collectives(), bytes > 0 ? "shared memory" : "gloo") << r.rank;
    }
    std::vector<v1::StepRequest> run = {LogitsStep(kTokens, (*g)->n_blocks()),
                                        LogitsStep({5}, (*g)->n_blocks())};
    run[1].set_step_id(2);
    run[1].mutable_seqs(0)->set_start_pos(static_cast<int64_t>(kTokens.size()));
    for (size_t i = 0; i < run.size(); ++i) {
      auto r = (*g)->RunStep(run[i]);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->seqs_size(), 1);
      std::vector<float> logits(r->seqs(0).logits().begin(), r->seqs(0).logits().end());
      if (bytes == 0) {
        want.push_back(logits);
      } else {
        ASSERT_EQ(logits.size(), want[i].size());
        EXPECT_EQ(std::memcmp(logits.data(), want[i].data(), logits.size() * sizeof(float)), 0)
            << "step " << i;
      }
    }
  }
}

// The events tesserad's metrics hang on: on_ready once the ranks have loaded, and after a
// step one duration per all-reduce the step made. A llama forward at TP 2 all-reduces the
// vocab-parallel embedding rows once, then after each block's attention output and FFN
// down projections (the row-parallel products): 2 per block + 1.
TEST(WorkerGroup, EventsReportReadyAndEachAllReduceOfAStep) {
  const std::string model = Synthetic("llama", "F32");
  auto file = gguf::GgufModel::Open(model);
  ASSERT_TRUE(file.ok());
  const model::HyperParams hp = model::LoadHyperParams(*model::FindArch("llama"), "llama",
                                                       file->metadata(), nullptr, nullptr);
  auto g = WorkerGroup::Create(Options(model, 2));
  ASSERT_TRUE(g.ok()) << g.status();
  std::mutex mu;
  std::vector<double> ready_seconds;
  std::vector<std::vector<double>> steps;
  WorkerGroupEvents ev;
  ev.on_ready = [&](double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    ready_seconds.push_back(seconds);
  };
  std::vector<StepTiming> timings;
  ev.on_step = [&](const StepTiming& t) {
    std::lock_guard<std::mutex> lock(mu);
    steps.push_back(t.allreduce_seconds);
    timings.push_back(t);
  };
  (*g)->set_events(ev);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE((*g)->Start().ok());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto step_start = std::chrono::steady_clock::now();
  auto r = (*g)->RunStep(LogitsStep(kTokens, (*g)->n_blocks()));
  const double step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  ASSERT_TRUE(r.ok()) << r.status();
  std::lock_guard<std::mutex> lock(mu);
  // The step's parts, from the workers' clock stamps, fit inside the step as this thread
  // timed it. The two hand-offs are measured to the last rank that took the step and from
  // the last rank that finished it, and rank 0's compute began when rank 0 took it, so
  // only each hand-off with the other, and the compute alone, are bounded by the step: a
  // rank 0 that took the step before rank 1 waits for it inside its compute time.
  ASSERT_EQ(timings.size(), 1u);
  EXPECT_GE(timings[0].to_workers_seconds, 0.0);
  EXPECT_GE(timings[0].to_controller_seconds, 0.0);
  EXPECT_GT(timings[0].compute_seconds, 0.0);
  EXPECT_LE(timings[0].compute_seconds, step_seconds);
  EXPECT_LE(timings[0].to_workers_seconds + timings[0].to_controller_seconds, step_seconds);
  EXPECT_GE(timings[0].control_seconds, 0.0);
  EXPECT_LE(timings[0].control_seconds + timings[0].compute_seconds, step_seconds);
  ASSERT_EQ(ready_seconds.size(), 1u);
  EXPECT_GT(ready_seconds[0], 0.0);
  EXPECT_LE(ready_seconds[0], waited);
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].size(), 2 * hp.n_layer + 1);
  for (double seconds : steps[0]) {
    EXPECT_GT(seconds, 0.0);
    EXPECT_LT(seconds, 60.0);
  }
}

// The worker processes' reads (resident mapped pages and pread bytes, from /proc) against
// what the shard plan of `model` at `tp` says each rank reads.
void ExpectReadsFollowThePlan(const std::string& model, const std::string& arch_name,
                              const std::vector<int>& tps, model::ExpertParallel ep) {
  auto file = gguf::GgufModel::Open(model);
  ASSERT_TRUE(file.ok());
  const model::ArchSpec* arch = model::FindArch(arch_name);
  model::HyperParams hp =
      model::LoadHyperParams(*arch, arch_name, file->metadata(), nullptr, nullptr);
  model::TensorMap map = model::MapTensors(*arch, hp, *file);
  uint64_t total = 0;
  for (const auto& t : file->tensors()) total += t.n_bytes;
  for (int tp : tps) {
    SCOPED_TRACE(absl::StrCat(arch_name, " tp ", tp));
    model::PlanOptions plan_options;
    plan_options.experts = ep;
    model::ShardPlan plan = model::BuildShardPlan(map, hp, tp, plan_options);
    WorkerGroupOptions o = Options(model, tp);
    o.expert_parallel = std::string(model::ExpertParallelName(ep));
    auto g = WorkerGroup::Create(o);
    ASSERT_TRUE(g.ok());
    ASSERT_TRUE((*g)->Start().ok());
    for (const RankState& r : (*g)->ranks()) {
      // What the plan says this rank reads, split the way the loader reads it: shards that
      // are one contiguous range are used in place from the mapping (faulted in at load),
      // strided ones (input-column splits) are gathered with pread.
      uint64_t in_place = 0, gathered = 0, ranges = 0;
      for (const model::TensorShard& sh : plan.ranks[r.rank].shards) {
        const bool contiguous = sh.ranges.size() == 1 && sh.ranges[0].count == 1;
        const bool whole = sh.begin == 0 && sh.read_bytes == map.tensors[sh.mapping].info->n_bytes;
        if (tp == 1 || whole || contiguous) {
          in_place += sh.read_bytes;
          ++ranges;
        } else {
          gathered += sh.read_bytes;
        }
      }
      const uint64_t mapped = r.info.mapped_bytes(), pread = r.info.pread_bytes();
      std::printf(
          "tp %d rank %d: mapped %.2f MiB (plan %.2f), pread %.2f MiB (plan %.2f), "
          "plan total %.2f of %.2f MiB of tensors\n",
          tp, r.rank, mapped / 1048576.0, in_place / 1048576.0, pread / 1048576.0,
          gathered / 1048576.0, plan.ranks[r.rank].read_bytes / 1048576.0, total / 1048576.0);
      // rchar counts the pread bytes exactly (plus the few hundred bytes of /proc files
      // the worker reads itself).
      EXPECT_GE(pread, gathered) << "rank " << r.rank;
      EXPECT_LE(pread, gathered + 65536) << "rank " << r.rank;
      // Resident pages: every in-place byte, rounded out to pages, plus the kernel's
      // fault-around (up to 64 KiB on each side of each range here, more on some kernels:
      // 256 KiB per range is allowed) and the header pages (1 MiB).
      EXPECT_GE(mapped, in_place) << "rank " << r.rank;
      EXPECT_LE(mapped, in_place + ranges * (256u << 10) + (1u << 20)) << "rank " << r.rank;
      EXPECT_EQ(r.info.weight_bytes_read(), mapped + pread);
    }
    if (tp >= 2) {
      // Each rank plans about its share: the split tensors (or the experts) dominate these
      // models. What it reads is checked against its plan above (to the page, plus the
      // kernel's fault-around, which on the small tensors of the expert test is a third of
      // the bytes, so no tighter bound on the process holds there).
      const uint64_t share = total / tp;
      for (const auto& rp : plan.ranks) EXPECT_LT(rp.read_bytes, share * 12 / 10);
      if (tp == 2 && arch_name == "llama") {
        for (const RankState& r : (*g)->ranks()) {
          EXPECT_LT(r.info.weight_bytes_read(), total * 7 / 10) << "rank " << r.rank;
        }
      }
    }
  }
}

TEST(WorkerGroup, EachRankReadsItsShare) {
  ExpectReadsFollowThePlan(Synthetic("llama", "Q8_0", "124m"), "llama", {1, 2},
                           model::ExpertParallel::kAuto);
}

// Under expert parallelism a rank reads its experts' matrices and no byte of the others'
// (each expert stack's share is one contiguous range, used in place).
TEST(WorkerGroup, EachRankReadsOnlyItsExperts) {
  model::SyntheticOptions o;
  o.arch = "qwen3moe";
  o.preset = "ep-1408";  // 6 experts of 1,408: the experts are most of the bytes
  o.quant = "Q8_0";
  o.seed = 9;
  auto w = model::BuildSyntheticModel(o);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string path = absl::StrCat(::testing::TempDir(), "/wg-qwen3moe-ep-1408.gguf");
  ASSERT_TRUE(w->WriteFile(path).ok());
  ExpectReadsFollowThePlan(path, "qwen3moe", {2, 3}, model::ExpertParallel::kOn);
}

TEST(WorkerGroup, KilledWorkerFailsTheStepAndTheGroupRestarts) {
  const std::string model = Synthetic("llama", "Q8_0");
  WorkerGroupOptions o = Options(model, 2);
  o.max_restarts = 3;
  o.restart_backoff = std::chrono::milliseconds(200);
  auto log = std::make_shared<std::vector<std::string>>();
  auto log_mu = std::make_shared<std::mutex>();
  o.log = [log, log_mu](const std::string& line) {
    std::fprintf(stderr, "[group] %s\n", line.c_str());
    std::lock_guard<std::mutex> lock(*log_mu);
    log->push_back(line);
  };
  auto g = WorkerGroup::Create(o);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->Start().ok());
  ASSERT_TRUE((*g)->RunStep(LogitsStep(kTokens, (*g)->n_blocks())).ok());
  const pid_t victim = (*g)->ranks()[1].pid;
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  // Steps in flight or issued now fail, naming the rank and the signal.
  absl::Status failed;
  for (int i = 0; i < 200 && failed.ok(); ++i) {
    failed = (*g)->RunStep(LogitsStep(kTokens, (*g)->n_blocks())).status();
    if (failed.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_NE(failed.message().find("rank 1"), absl::string_view::npos) << failed;
  // The failure reaches clients: it names the rank, never the process id, which only the
  // operator's log carries.
  EXPECT_EQ(failed.message().find("pid"), absl::string_view::npos) << failed;
  {
    std::lock_guard<std::mutex> lock(*log_mu);
    const std::string logged = "worker rank 1/2 (pid " + std::to_string(victim) + ")";
    EXPECT_TRUE(std::any_of(
        log->begin(), log->end(),
        [&](const std::string& line) { return line.find(logged) != std::string::npos; }))
        << "no log line names " << logged;
  }
  // The group comes back and serves again.
  for (int i = 0; i < 300 && !(*g)->ready(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE((*g)->ready()) << (*g)->state();
  EXPECT_EQ((*g)->restarts(), 1);
  EXPECT_NE((*g)->ranks()[1].pid, victim);
  EXPECT_TRUE((*g)->RunStep(LogitsStep(kTokens, (*g)->n_blocks())).ok());
}

TEST(WorkerGroup, ARankThatNeverJoinsTimesOutNamingIt) {
  const std::string model = Synthetic("llama", "Q8_0");
  WorkerGroupOptions o = Options(model, 2);
  o.external_workers = true;
  o.rendezvous_timeout = std::chrono::milliseconds(1500);
  auto g = WorkerGroup::Create(o);
  ASSERT_TRUE(g.ok());
  // Only rank 0 is started.
  auto bin = FindWorkerBinary("");
  ASSERT_TRUE(bin.ok()) << bin.status();
  std::string addr = (*g)->control_address();
  addr = "127.0.0.1" + addr.substr(addr.rfind(':'));
  std::vector<std::string> args = {*bin, "--controller", addr, "--rank", "0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  absl::Status s = (*g)->Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("1"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("never"), absl::string_view::npos) << s;
  (*g)->Shutdown();
  // The lone worker is told to stop (or loses its controller) and exits.
  int status = 0;
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (i == 99) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "the worker did not exit";
    }
  }
}

}  // namespace
}  // namespace tessera::workers
