// The worker group's public face: creating it (the control service's server), starting
// and stopping it, and running steps through its workers. The control service is in
// control_service.cc, supervision in supervisor.cc, spawning a worker in worker_launch.cc
// and the rendezvous store in rendezvous_store.cc.
#include "controller/workers/worker_group.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/util/monotonic.h"
#include "common/util/spin.h"
#include "common/util/thread_name.h"
#include "controller/workers/worker_group_impl.h"

namespace tessera::workers {

namespace v1 = tessera::v1;

namespace {

// How long a wait for results sleeps before it looks at the group's state again (a
// failure also wakes it at once).
constexpr auto kResultPoll = std::chrono::milliseconds(20);
// How long StartStep waits for polling ranks to take the step.
constexpr auto kTakePoll = std::chrono::microseconds(200);

// Whether the step in flight can no longer finish. g.mu held.
bool StepStopped(const WorkerGroup::Impl& g, const InFlightStep& f) {
  return g.generation != f.generation || !g.failure.empty() || g.shutting_down;
}

// Where the step's duration is known (the last step of its shape), the wait for its results
// sleeps until shortly before it ends and then polls, yielding the core between polls, until
// shortly after: a thread that sleeps through a long step on a virtual machine is woken
// 40-130 us after the result is posted (`workers_bench wake`: the idle vCPU must first be
// scheduled by the hypervisor), where a polling one takes the result in microseconds. A
// vCPU that is idle costs nothing to poll on; a busy one runs whatever else is runnable
// first. The margin either side follows how far the recent predictions were off.
constexpr auto kPollMargin = std::chrono::microseconds(200);
constexpr auto kPollMaxMargin = std::chrono::microseconds(5000);

struct ResultWait {
  Clock::time_point poll_from = Clock::time_point::max();
  Clock::time_point poll_until = Clock::time_point::min();
};

ResultWait ResultWaitOf(const InFlightStep& f) {
  ResultWait w;
  if (!f.expected.has_value()) return w;
  // Twice how far recent predictions were off, within [kPollMargin, an eighth of the step]
  // and at most kPollMaxMargin.
  const Clock::duration most = std::max<Clock::duration>(
      kPollMargin, std::min<Clock::duration>(*f.expected / 8, kPollMaxMargin));
  const Clock::duration margin =
      std::clamp<Clock::duration>(2 * f.expected_error, kPollMargin, most);
  w.poll_from = f.handed_off + *f.expected - margin;
  w.poll_until = f.handed_off + *f.expected + margin;
  return w;
}

// Moves the results that come through the step channels into their slots, waiting for each
// until it is in or the step stops. A result too large for its mailbox goes by the stream
// and arrives like the results of ranks without a channel.
void TakeChannelResults(WorkerGroup::Impl& g, const InFlightStep& f) {
  const ResultWait w = ResultWaitOf(f);
  for (const auto& s : f.slots) {
    if (!s->channel_attached) continue;
    while (true) {
      v1::StepResult r;
      bool parsed = false;
      const ipc::ShmChannel::Taken taken = s->channel->Take(
          ipc::Mailbox::kToController,
          [&](const char* p, size_t n) { parsed = r.ParseFromArray(p, static_cast<int>(n)); });
      if (taken == ipc::ShmChannel::Taken::kElsewhere) break;
      {
        std::lock_guard<std::mutex> lock(g.mu);
        if (taken == ipc::ShmChannel::Taken::kMessage) {
          if (parsed) {
            s->result = std::move(r);
          } else {
            g.FailLocked(absl::StrCat("worker rank ", s->state.rank,
                                      " sent a step result that does not parse"));
          }
          break;
        }
        if (StepStopped(g, f)) break;
      }
      // FailLocked wakes this wait (a poll sees the failure at its end).
      const Clock::time_point now = Clock::now();
      if (now < w.poll_from) {
        s->channel->Wait(
            ipc::Mailbox::kToController,
            std::min<std::chrono::microseconds>(
                kResultPoll, std::chrono::ceil<std::chrono::microseconds>(w.poll_from - now)));
      } else if (now < w.poll_until) {
        const auto poll = std::chrono::ceil<std::chrono::microseconds>(w.poll_until - now);
        s->channel->Wait(ipc::Mailbox::kToController, poll, poll);
      } else {
        s->channel->Wait(ipc::Mailbox::kToController, kResultPoll);
      }
    }
  }
}

// Where the step's time went, from every rank's result (rank 0's first), the moment the
// step was handed off and the moment every result was in.
StepTiming TimingOf(const std::vector<v1::StepResult>& results, Clock::time_point handed_off,
                    Clock::time_point results_in) {
  const v1::StepResult& r0 = results.front();
  StepTiming timing;
  timing.compute_seconds = r0.compute_seconds();
  // Each all-reduce as the rank that waited longest in it saw it.
  std::vector<double>& allreduce = timing.allreduce_seconds;
  allreduce.assign(r0.allreduce_seconds().begin(), r0.allreduce_seconds().end());
  for (const v1::StepResult& r : results) {
    const auto& calls = r.allreduce_seconds();
    if (static_cast<size_t>(calls.size()) != allreduce.size()) continue;  // not the same calls
    for (int i = 0; i < calls.size(); ++i) allreduce[i] = std::max(allreduce[i], calls[i]);
  }
  // The workers' clock stamps, where every rank gave them and they fall inside the step.
  const int64_t handed_off_ns = MonotonicNanos(handed_off);
  const int64_t results_in_ns = MonotonicNanos(results_in);
  int64_t last_taken = 0, last_finished = 0;
  bool stamped = true;
  for (const v1::StepResult& r : results) {
    const int64_t taken = r.taken_ns(), finished = r.finished_ns();
    stamped = stamped && taken >= handed_off_ns && finished >= taken && finished <= results_in_ns;
    last_taken = std::max(last_taken, taken);
    last_finished = std::max(last_finished, finished);
  }
  timing.control_seconds = std::max(
      0.0, std::chrono::duration<double>(results_in - handed_off).count() - timing.compute_seconds);
  if (stamped) {
    timing.to_workers_seconds = static_cast<double>(last_taken - handed_off_ns) * 1e-9;
    timing.to_controller_seconds = static_cast<double>(results_in_ns - last_finished) * 1e-9;
  }
  return timing;
}

}  // namespace

std::string Mib(uint64_t bytes) { return absl::StrCat(bytes / (1024 * 1024), " MiB"); }

bool WriteToWorker(Slot& slot, const v1::ControllerMessage& message) {
  std::lock_guard<std::mutex> w(slot.write_mu);
  return slot.stream != nullptr && slot.stream->Write(message);
}

void WorkerGroup::Impl::FailLocked(const std::string& why) {
  if (!failure.empty()) return;
  failure = why;
  up = false;
  cv.notify_all();
  // A step's wait for results on a channel wakes and sees the failure.
  for (const auto& s : slots) {
    if (s->channel != nullptr) s->channel->Wake(ipc::Mailbox::kToController);
  }
}

void WorkerGroup::Impl::SoftFailLocked(const std::string& why) {
  if (!soft_failure.empty() || !failure.empty()) return;
  soft_failure = why;
  soft_since = Clock::now();
}

std::string WorkerGroup::Impl::ControlAddress() const {
  std::string host = options.control_host;
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {0};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return absl::StrCat(host, ":", bound_port);
}

WorkerGroup::WorkerGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WorkerGroup::~WorkerGroup() { Shutdown(); }

absl::StatusOr<std::unique_ptr<WorkerGroup>> WorkerGroup::Create(WorkerGroupOptions options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a group of ", options.world_size, " ranks"));
  }
  if (!options.external_workers) {
    auto bin = FindWorkerBinary(options.worker_binary);
    if (!bin.ok()) return bin.status();
    options.worker_binary = *bin;
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      absl::StrCat(impl->options.control_host, ":", impl->options.control_port),
      grpc::InsecureServerCredentials(), &impl->bound_port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(impl.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", impl->options.control_host, ":",
                                               impl->options.control_port,
                                               " for the worker control service"));
  }
  return std::unique_ptr<WorkerGroup>(new WorkerGroup(std::move(impl)));
}

absl::Status WorkerGroup::Start() {
  Impl& g = *impl_;
  g.supervisor = std::thread([&g] {
    NameThisThread("tessera-workers");
    g.Supervise();
  });
  std::unique_lock<std::mutex> lock(g.mu);
  g.cv.wait(lock, [&] { return g.first_outcome || g.shutting_down; });
  return g.first_status;
}

void WorkerGroup::Shutdown() {
  Impl& g = *impl_;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.shutting_down && !g.supervisor.joinable() && g.server == nullptr) return;
    g.shutting_down = true;
    g.cv.notify_all();
  }
  g.store.Shutdown();  // a rank waiting in the rendezvous store gives up
  if (g.supervisor.joinable()) g.supervisor.join();
  // Workers got Shutdown on their streams; give them a moment, then make sure.
  std::vector<pid_t> pids;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    pids = g.pids;
    g.pids.clear();
  }
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  for (pid_t p : pids) {
    while (waitpid(p, nullptr, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (g.server != nullptr) {
    g.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    g.server.reset();
  }
}

absl::StatusOr<v1::StepResult> WorkerGroup::RunStep(const v1::StepRequest& step) {
  if (absl::Status started = StartStep(step); !started.ok()) return started;
  return FinishStep();
}

absl::Status WorkerGroup::StartStep(const v1::StepRequest& step) {
  Impl& g = *impl_;
  std::unique_lock<std::mutex> one_step(g.step_mu);
  InFlightStep f;
  f.step_id = step.step_id();
  f.shape.sequences = step.seqs_size();
  f.shape.tokens = 0;
  for (const v1::StepSequence& q : step.seqs()) f.shape.tokens += q.tokens_size();
  if (f.shape == g.last_shape) {
    f.expected = g.last_round_trip;
    f.expected_error = g.prediction_error;
  }
  f.handed_off = Clock::now();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (!g.up) return absl::UnavailableError(absl::StrCat("the workers are not ready: ", g.state));
    f.slots = g.slots;
    f.generation = g.generation;
    for (auto& s : f.slots) s->result.reset();
  }
  std::string bytes;  // the step serialized once for the channels
  bool serialized = false;
  v1::ControllerMessage m;  // the step as a stream message, built when one needs it
  auto write_stream = [&](Slot& s) {
    if (!m.has_step()) *m.mutable_step() = step;
    return WriteToWorker(s, m);
  };
  for (auto& s : f.slots) {
    absl::Status sent;
    if (s->channel_attached) {
      if (!serialized) {
        step.SerializeToString(&bytes);
        serialized = true;
      }
      // Too large for the mailbox: it goes by the stream, and the mailbox says so.
      sent = s->channel->PostOrSendElsewhere(
          ipc::Mailbox::kToWorker, bytes.size(),
          [&](char* p) { std::memcpy(p, bytes.data(), bytes.size()); },
          [&] { return write_stream(*s); });
    } else if (!write_stream(*s)) {
      sent = absl::UnavailableError("the stream is closed");
    }
    if (!sent.ok()) {
      std::lock_guard<std::mutex> lock(g.mu);
      g.FailLocked(
          absl::IsUnavailable(sent)
              ? absl::StrCat("worker rank ", s->state.rank, " cannot be reached")
              : absl::StrCat("worker rank ", s->state.rank, " step channel: ", sent.message()));
      break;
    }
  }
  // The caller's next work (delivering the previous step's tokens to its clients) runs
  // while the ranks compute; where every CPU holds a rank it takes a CPU a rank needs, and a
  // rank that yields to it takes the step late while the others wait for it in the first
  // all-reduce. Where the ranks poll for their steps, yield until all have taken this one
  // (microseconds), at most kTakePoll.
  auto polls = [](const std::shared_ptr<Slot>& s) {
    return s->channel_attached && s->polls_for_steps;
  };
  if (std::any_of(f.slots.begin(), f.slots.end(), polls)) {
    YieldingPoll(
        [&] {
          return std::none_of(f.slots.begin(), f.slots.end(), [&](const std::shared_ptr<Slot>& s) {
            return polls(s) && s->channel->Untaken(ipc::Mailbox::kToWorker);
          });
        },
        kTakePoll);
  }
  // A failure is the step's result: FinishStep reports it.
  g.in_flight = std::move(f);
  g.step_lock = std::move(one_step);
  return absl::OkStatus();
}

absl::StatusOr<v1::StepResult> WorkerGroup::FinishStep() {
  Impl& g = *impl_;
  if (!g.in_flight.has_value()) {
    return absl::FailedPreconditionError("FinishStep without a started step");
  }
  std::unique_lock<std::mutex> one_step = std::move(g.step_lock);
  const InFlightStep f = *std::exchange(g.in_flight, std::nullopt);
  TakeChannelResults(g, f);
  std::vector<v1::StepResult> results;  // per rank
  std::function<void(const StepTiming&)> on_step;
  Clock::time_point results_in;
  {
    std::unique_lock<std::mutex> lock(g.mu);
    g.cv.wait(lock, [&] {
      if (StepStopped(g, f)) return true;
      for (auto& s : f.slots) {
        if (!s->result.has_value()) return false;
      }
      return true;
    });
    if (StepStopped(g, f)) {
      return absl::UnavailableError(g.failure.empty() ? "the controller is stopping" : g.failure);
    }
    results_in = Clock::now();
    const Clock::duration round_trip = results_in - f.handed_off;
    if (f.expected.has_value()) {
      const Clock::duration error = round_trip - *f.expected;
      g.prediction_error += (std::chrono::abs(error) - g.prediction_error) / 8;
    }
    g.last_shape = f.shape;
    g.last_round_trip = round_trip;
    for (auto& s : f.slots) results.push_back(std::move(*s->result));
    on_step = g.events.on_step;  // the event runs without the group's lock
  }
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].error().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "step ", f.step_id, " on rank ", f.slots[r]->state.rank, ": ", results[r].error()));
    }
  }
  if (on_step) on_step(TimingOf(results, f.handed_off, results_in));
  return std::move(results.front());
}

int WorkerGroup::block_size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->slots.empty() ? 0 : impl_->slots[0]->state.info.block_size();
}

int WorkerGroup::n_blocks() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->slots.empty()) return 0;
  int n = impl_->slots[0]->state.info.n_blocks();
  for (const auto& s : impl_->slots) {
    if (s->state.loaded) n = std::min(n, s->state.info.n_blocks());
  }
  return n;
}

bool WorkerGroup::ready() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->up;
}

uint64_t WorkerGroup::cache_epoch() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->generation;
}

std::string WorkerGroup::control_address() const { return impl_->ControlAddress(); }

std::vector<RankState> WorkerGroup::ranks() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<RankState> out;
  for (const auto& s : impl_->slots) out.push_back(s->state);
  return out;
}

int WorkerGroup::restarts() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->restarts;
}

std::string WorkerGroup::state() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->state;
}

void WorkerGroup::set_events(WorkerGroupEvents events) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->events = std::move(events);
}

}  // namespace tessera::workers
