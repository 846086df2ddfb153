#include "controller/workers/worker_launch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "controller/workers/gpu_plan.h"
#include "controller/workers/worker_group.h"

namespace tessera::workers {

static_assert(kStepChannelFd == 3 && kCollectivesFd == 4,
              "SpawnWorker closes every other descriptor from 3 up around these two");

namespace {

std::vector<std::string> WorkerArguments(const WorkerLaunch& launch) {
  const bool wildcard = launch.control_host == "0.0.0.0" || launch.control_host == "::";
  std::vector<std::string> args = {
      launch.binary,
      "--controller",
      absl::StrCat(wildcard ? "127.0.0.1" : launch.control_host, ":", launch.control_port),
      "--rank",
      std::to_string(launch.rank),
      "--generation",
      std::to_string(launch.generation),
      "--die-with-parent"};
  if (launch.step_channel != nullptr) {
    args.push_back("--step-channel-fd");
    args.push_back(std::to_string(kStepChannelFd));
  }
  if (launch.collectives != nullptr) {
    args.push_back("--collectives-fd");
    args.push_back(std::to_string(kCollectivesFd));
  }
  return args;
}

}  // namespace

absl::StatusOr<pid_t> SpawnWorker(const WorkerLaunch& launch) {
  std::vector<std::string> args = WorkerArguments(launch);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string cuda_env;
  if (launch.gpu >= 0) {
    cuda_env =
        absl::StrCat("CUDA_VISIBLE_DEVICES=",
                     ChildCudaVisibleDevices(std::getenv("CUDA_VISIBLE_DEVICES"), launch.gpu));
  }
  const ipc::ShmChannel* shared = launch.step_channel;
  const ipc::ShmCollectives* group = launch.collectives;
  const long max_fd = sysconf(_SC_OPEN_MAX);
  pid_t pid = fork();
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start worker rank ", launch.rank, ": fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // The worker needs only stdio. Inheriting the controller's other descriptors would keep
    // its listening sockets open after a drain closes them (new clients then hang in the
    // kernel's backlog instead of being refused) and its connections open after it closes
    // them. The step channel and the collective group alone are passed on, as
    // descriptors kStepChannelFd and kCollectivesFd (their own descriptors are numbered
    // above both, so neither dup2 closes the other's source); whichever of the two the
    // worker does not get is closed like the rest.
    if (shared != nullptr && !shared->ShareWithChild(kStepChannelFd)) _exit(126);
    if (group != nullptr && !group->ShareWithChild(kCollectivesFd)) _exit(126);
    if (shared == nullptr) close(kStepChannelFd);
    if (group == nullptr) close(kCollectivesFd);
    if (close_range(kCollectivesFd + 1, ~0U, 0) != 0) {
      for (long fd = kCollectivesFd + 1; fd < max_fd; ++fd) close(static_cast<int>(fd));
    }
    if (!cuda_env.empty()) putenv(cuda_env.data());
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = strsignal(sig);
    return absl::StrCat("was killed by signal ", sig, name ? absl::StrCat(" (", name, ")") : "");
  }
  return "stopped";
}

absl::StatusOr<std::string> FindWorkerBinary(const std::string& configured) {
  namespace fs = std::filesystem;
  std::vector<std::string> tried;
  auto usable = [&](const fs::path& p) {
    tried.push_back(p.string());
    return access(p.c_str(), X_OK) == 0;
  };
  if (!configured.empty()) {
    if (usable(configured)) return configured;
    return absl::NotFoundError(
        absl::StrCat("worker binary ", configured, " does not exist or is not executable"));
  }
  if (const char* env = std::getenv("TESSERA_WORKER_BINARY"); env != nullptr && *env) {
    if (usable(env)) return std::string(env);
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = self.parent_path();
    for (const fs::path& p :
         {dir / "tessera-worker", dir.parent_path() / "bin" / "tessera-worker"}) {
      if (usable(p)) return p.string();
    }
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (const auto& d : absl::StrSplit(std::string(path), ':')) {
      fs::path p = fs::path(std::string(d)) / "tessera-worker";
      if (access(p.c_str(), X_OK) == 0) return p.string();
    }
    tried.push_back("tessera-worker on PATH");
  }
  return absl::NotFoundError(absl::StrCat("cannot find the tessera-worker binary (tried ",
                                          absl::StrJoin(tried, ", "),
                                          "); set --worker-binary or TESSERA_WORKER_BINARY"));
}

}  // namespace tessera::workers
