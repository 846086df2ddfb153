// Supervision: each generation of workers is started (spawned, or awaited when external),
// watched until every rank loaded and then until it fails (a death, a reported failure, a
// closed stream, missed heartbeats), stopped, and started again after a backoff, up to
// max_restarts failures in a row.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/workers/worker_group_impl.h"
#include "controller/workers/worker_launch.h"

namespace tessera::workers {

namespace v1 = tessera::v1;

void WorkerGroup::Impl::Supervise() {
  int consecutive = 0;
  while (true) {
    std::string why = RunGeneration();
    std::unique_lock<std::mutex> lock(mu);
    if (shutting_down) break;
    // A group that served before it failed starts a fresh count: only failures in a
    // row (a model that cannot load, a crash at once) exhaust max_restarts.
    if (came_up) consecutive = 0;
    Log(absl::StrCat("worker group failed: ", why));
    if (!first_outcome) {
      first_outcome = true;
      first_status = absl::UnavailableError(why);
      cv.notify_all();
    }
    ++consecutive;
    if (consecutive > options.max_restarts) {
      state = absl::StrCat("gave up after ", consecutive, " failure(s); last: ", why);
      Log(state);
      cv.notify_all();
      // Stay down; reap what is left and wait for shutdown.
      while (!shutting_down) {
        ReapLocked();
        cv.wait_for(lock, std::chrono::milliseconds(200));
      }
      break;
    }
    auto backoff = options.restart_backoff * (1 << std::min(consecutive - 1, 16));
    backoff = std::min<std::chrono::milliseconds>(backoff, options.restart_backoff_max);
    state = absl::StrCat("restarting in ", backoff.count() / 1000.0, " s after: ", why);
    Log(state);
    ++restarts;
    if (events.on_restart) {
      const std::function<void(int)> on_restart = events.on_restart;
      lock.unlock();  // the event runs without the group's lock
      for (int r = 0; r < options.world_size; ++r) on_restart(r);
      lock.lock();
    }
    const auto until = Clock::now() + backoff;
    while (!shutting_down && Clock::now() < until) {
      ReapLocked();
      cv.wait_until(lock, until);
    }
    WaitForOldWorkersLocked(lock);
    if (shutting_down) break;
  }
}

void WorkerGroup::Impl::WaitForOldWorkersLocked(std::unique_lock<std::mutex>& lock) {
  // Let the old children go before the next generation starts. They were killed when their
  // generation ended, so each wait is short, but it is a wait: the lock is let go meanwhile.
  // Only this thread reaps and spawns, so no pid is added or taken while it is let go.
  const std::vector<pid_t> old = std::exchange(pids, {});
  lock.unlock();
  for (pid_t p : old) waitpid(p, nullptr, 0);
  lock.lock();
}

std::string WorkerGroup::Impl::RunGeneration() {
  std::unique_lock<std::mutex> lock(mu);
  BeginGenerationLocked();
  LoadWatch watch;
  watch.start = Clock::now();
  if (!options.external_workers) {
    SpawnGenerationLocked();
  } else {
    Log(absl::StrCat("waiting for ", options.world_size, " external worker(s) at ",
                     ControlAddress()));
  }
  watch.connect_deadline = Clock::now() + options.rendezvous_timeout;
  watch.last_progress_log = Clock::now();
  while (!shutting_down && failure.empty()) {
    cv.wait_for(lock, std::chrono::milliseconds(50));
    ReapLocked();
    CheckHeartbeatsLocked();
    if (!soft_failure.empty() && failure.empty() &&
        Clock::now() - soft_since > std::chrono::milliseconds(300)) {
      FailLocked(soft_failure);
    }
    if (!up) WatchLoadLocked(lock, watch);
  }
  std::string why = shutting_down ? "" : failure;
  EndGenerationLocked(lock, why);
  return why;
}

void WorkerGroup::Impl::BeginGenerationLocked() {
  ++generation;
  failure.clear();
  soft_failure.clear();
  store.Clear();
  slots.clear();
  pids.clear();
  for (int r = 0; r < options.world_size; ++r) {
    slots.push_back(std::make_shared<Slot>());
    slots.back()->state.rank = r;
  }
  accepting = true;
  cv.notify_all();
  state = "loading";
  came_up = false;
}

void WorkerGroup::Impl::SpawnGenerationLocked() {
  collectives.reset();
  if (options.world_size > 1 && options.gpus.empty() && options.comm_backend == "gloo" &&
      options.collective_slot_bytes > 0) {
    auto group = ipc::ShmCollectives::Create(options.world_size, options.collective_slot_bytes);
    if (group.ok()) {
      collectives = *std::move(group);
    } else {
      Log(absl::StrCat("no shared-memory collectives (", group.status().message(),
                       "); the ranks all-reduce over Gloo (TCP)"));
    }
  }
  for (int r = 0; r < options.world_size; ++r) {
    if (absl::Status s = SpawnLocked(r); !s.ok()) {
      FailLocked(std::string(s.message()));
      break;
    }
  }
  Log(absl::StrCat("started ", options.world_size, " worker(s) for ", options.model_path,
                   " (generation ", generation, ")"));
}

absl::Status WorkerGroup::Impl::SpawnLocked(int rank) {
  // Steps and results go through shared memory; without it (memfd refused) over the stream.
  // A step's tokens and a result's sampled tokens take kilobytes; a mailbox's pages are
  // touched only as messages use them.
  absl::StatusOr<std::unique_ptr<ipc::ShmChannel>> channel =
      absl::UnavailableError("step_channel_bytes is 0");
  if (options.step_channel_bytes > 0) {
    channel = ipc::ShmChannel::Create(options.step_channel_bytes);
  }
  if (channel.ok()) {
    slots[rank]->channel = *std::move(channel);
  } else if (options.step_channel_bytes > 0) {
    Log(absl::StrCat("rank ", rank, "/", options.world_size, ": no shared-memory step channel (",
                     channel.status().message(), "); steps go over gRPC"));
  }
  WorkerLaunch launch;
  launch.binary = options.worker_binary;
  launch.control_host = options.control_host;
  launch.control_port = bound_port;
  launch.rank = rank;
  launch.generation = generation;
  launch.step_channel = slots[rank]->channel.get();
  launch.collectives = collectives.get();
  launch.gpu = options.gpus.empty() ? -1 : options.gpus[rank % options.gpus.size()];
  absl::StatusOr<pid_t> pid = SpawnWorker(launch);
  if (!pid.ok()) return pid.status();
  pids.push_back(*pid);
  slots[rank]->state.pid = *pid;
  return absl::OkStatus();
}

void WorkerGroup::Impl::WatchLoadLocked(std::unique_lock<std::mutex>& lock, LoadWatch& watch) {
  bool all_loaded = true;
  std::vector<std::string> unconnected;
  uint64_t done = 0, total = 0;
  for (const auto& s : slots) {
    all_loaded = all_loaded && s->state.loaded;
    if (!s->state.connected) unconnected.push_back(std::to_string(s->state.rank));
    done += s->state.bytes_done;
    total += s->state.bytes_total;
  }
  if (!unconnected.empty() && Clock::now() > watch.connect_deadline) {
    FailLocked(absl::StrCat("rendezvous: rank(s) ", absl::StrJoin(unconnected, ", "),
                            " never connected within ", options.rendezvous_timeout.count() / 1000.0,
                            " s"));
    return;
  }
  if (total > 0 && Clock::now() - watch.last_progress_log > std::chrono::seconds(2)) {
    watch.last_progress_log = Clock::now();
    Log(absl::StrCat("loading: ", Mib(done), " of ", Mib(total), " (",
                     static_cast<int>(100.0 * done / total), "%)"));
  }
  if (!all_loaded) return;
  if (std::string mismatch = CheckGeometryLocked(); !mismatch.empty()) {
    FailLocked(mismatch);
    return;
  }
  up = true;
  came_up = true;
  state = "ready";
  if (!first_outcome) {
    first_outcome = true;
    first_status = absl::OkStatus();
  }
  cv.notify_all();
  if (events.on_ready) {
    const double seconds = std::chrono::duration<double>(Clock::now() - watch.start).count();
    const std::function<void(double)> on_ready = events.on_ready;
    lock.unlock();  // the event runs without the group's lock
    on_ready(seconds);
    lock.lock();
  }
}

void WorkerGroup::Impl::EndGenerationLocked(std::unique_lock<std::mutex>& lock,
                                            const std::string& why) {
  up = false;
  accepting = false;
  // Stop this generation's workers: spawned ones are killed, external ones told to exit.
  // A write blocks while its worker does not read, so the lock is let go for the writes;
  // the slots stay (only this thread replaces them) and take no new worker (accepting is
  // false).
  const std::vector<std::shared_ptr<Slot>> this_generation = slots;
  lock.unlock();
  v1::ControllerMessage m;
  m.mutable_shutdown()->set_reason(why.empty() ? "controller stopping" : why);
  for (const auto& s : this_generation) WriteToWorker(*s, m);
  lock.lock();
  if (!shutting_down) KillGenerationLocked();
}

void WorkerGroup::Impl::KillGenerationLocked() {
  for (pid_t p : pids) kill(p, SIGKILL);
}

// Reaps the spawned workers; a death fails the generation. mu held. When several are
// found dead at once, the cause is named first: a worker killed by a signal, then one
// that exited without reporting a failure, before those that exited after reporting one
// (a peer's death breaks their collectives).
void WorkerGroup::Impl::ReapLocked() {
  struct Death {
    int rank;
    pid_t pid;
    int status;
    int priority;
  };
  std::vector<Death> deaths;
  for (auto it = pids.begin(); it != pids.end();) {
    int status = 0;
    if (waitpid(*it, &status, WNOHANG) == *it) {
      int rank = -1;
      for (size_t i = 0; i < slots.size(); ++i) {
        if (slots[i]->state.pid == *it) rank = static_cast<int>(i);
      }
      const bool reported = rank >= 0 && slots[rank]->reported_failure;
      deaths.push_back({rank, *it, status, WIFSIGNALED(status) ? 0 : reported ? 2 : 1});
      it = pids.erase(it);
    } else {
      ++it;
    }
  }
  if (deaths.empty()) return;
  std::stable_sort(deaths.begin(), deaths.end(),
                   [](const Death& a, const Death& b) { return a.priority < b.priority; });
  // The reason reaches clients (a failed request's status, /ready), which have no use for
  // process ids: it names ranks, and the pids go to the operator's log only.
  std::string why;
  for (const Death& d : deaths) {
    const std::string rank = absl::StrCat("worker rank ", d.rank, "/", options.world_size);
    Log(absl::StrCat(rank, " (pid ", d.pid, ") ", DescribeWaitStatus(d.status)));
    why += absl::StrCat(why.empty() ? "" : "; then ", rank, " ", DescribeWaitStatus(d.status));
  }
  if (deaths.front().priority != 0) {
    // Workers that exited (rather than being killed): often the consequence of a peer's
    // death that is not reaped yet (a collective broke when the peer's sockets closed,
    // before the kernel made it a zombie). Held back briefly like a reported failure, so
    // that the peer's signal is named first when it comes.
    SoftFailLocked(why);
    return;
  }
  if (!soft_failure.empty() && failure.empty()) why += "; reported: " + soft_failure;
  FailLocked(why);
}

void WorkerGroup::Impl::CheckHeartbeatsLocked() {
  const auto now = Clock::now();
  for (size_t r = 0; r < slots.size(); ++r) {
    const Slot& s = *slots[r];
    if (s.stream == nullptr) continue;
    if (now - s.last_seen > options.heartbeat_timeout) {
      FailLocked(absl::StrCat("worker rank ", r, "/", options.world_size,
                              " stopped answering (no heartbeat for ",
                              std::chrono::duration<double>(now - s.last_seen).count(), " s)"));
    }
  }
}

// Ranks that planned their cache from their own free GPU memory (kv_tokens 0) may end
// with different block counts; the group then uses the smallest (see n_blocks()).
std::string WorkerGroup::Impl::CheckGeometryLocked() {
  const v1::Loaded& a = slots[0]->state.info;
  const bool planned_per_rank = options.kv_tokens == 0 && !options.gpus.empty();
  for (const auto& s : slots) {
    if ((!planned_per_rank && s->state.info.n_blocks() != a.n_blocks()) ||
        s->state.info.block_size() != a.block_size()) {
      return absl::StrCat("ranks disagree on the KV cache: rank 0 has ", a.n_blocks(),
                          " blocks of ", a.block_size(), ", rank ", s->state.rank, " ",
                          s->state.info.n_blocks(), " of ", s->state.info.block_size());
    }
  }
  return "";
}

}  // namespace tessera::workers
