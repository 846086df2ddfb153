// The deployment files, checked by the tools operators would use (shellcheck,
// systemd-analyze) and by the structure of deploy.sh's dry run.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_split.h"
#include "controller/config/daemon_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

struct Result {
  int rc = -1;
  std::string out;
};

// Runs `command` through the shell; stdout only unless the command redirects stderr.
Result Shell(const std::string& command) {
  Result r;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool HaveTool(const std::string& tool) {
  return Shell("command -v " + tool + " >/dev/null 2>&1").rc == 0;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class DeployTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* src = std::getenv("TESSERA_SOURCE_DIR");
    if (src == nullptr) GTEST_SKIP() << "TESSERA_SOURCE_DIR not set (run through ctest)";
    src_ = src;
    tmp_ = fs::temp_directory_path() / ("tessera_deploy_test_" + std::to_string(::getpid()));
    fs::create_directories(tmp_);
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }

  // The action kinds of a dry run, in order: the third field of `[action] NN KIND ...`.
  std::vector<std::string> DryRunKinds(const std::string& flags, std::string* out = nullptr) {
    Result r =
        Shell((src_ / "deploy/lxc/deploy.sh").string() + " --dry-run " + flags + " 2>/dev/null");
    EXPECT_EQ(r.rc, 0) << r.out;
    if (out) *out = r.out;
    std::vector<std::string> kinds;
    std::regex line(R"(^\[action\] (\d\d) ([a-z][a-z-]*)( .*)?$)");
    int expected_no = 1;
    for (absl::string_view l : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
      std::string s(l);
      if (s.rfind("[action]", 0) != 0) continue;
      std::smatch m;
      EXPECT_TRUE(std::regex_match(s, m, line)) << s;
      if (m.empty()) continue;
      EXPECT_EQ(std::stoi(m[1]), expected_no++) << "actions are numbered 01, 02, ...: " << s;
      kinds.push_back(m[2]);
    }
    return kinds;
  }

  fs::path src_;
  fs::path tmp_;
};

TEST_F(DeployTest, ShellcheckCleanOnEveryScript) {
  if (!HaveTool("shellcheck")) GTEST_SKIP() << "shellcheck not installed (tools/install-deps.sh)";
  int n = 0;
  for (const char* dir : {"deploy", "tests"}) {
    for (const auto& e : fs::recursive_directory_iterator(src_ / dir)) {
      if (e.path().extension() != ".sh") continue;
      ++n;
      Result r = Shell("cd '" + e.path().parent_path().string() + "' && shellcheck -x '" +
                       e.path().filename().string() + "' 2>&1");
      EXPECT_EQ(r.rc, 0) << e.path() << "\n" << r.out;
    }
  }
  EXPECT_GE(n, 1);
}

TEST_F(DeployTest, SystemdAnalyzeAcceptsTheUnit) {
  if (!HaveTool("systemd-analyze")) {
    GTEST_SKIP() << "systemd-analyze not installed (Debian package systemd)";
  }
  // verify insists that ExecStart's binary exists: point it at a stub, change nothing else.
  std::string unit = ReadAll(src_ / "deploy/systemd/tesserad.service");
  ASSERT_THAT(unit, HasSubstr("ExecStart=/usr/local/bin/tesserad "));
  fs::path stub = tmp_ / "tesserad";
  std::ofstream(stub) << "#!/bin/sh\n";
  fs::permissions(stub, fs::perms::owner_all);
  auto write_unit = [&](const std::string& text) {
    fs::path p = tmp_ / "tesserad.service";
    std::ofstream(p) << std::regex_replace(text, std::regex("/usr/local/bin/tesserad"),
                                           stub.string());
    return p.string();
  };
  // The tool must be able to judge here: a broken unit has to be rejected.
  Result broken = Shell("systemd-analyze verify '" +
                        write_unit(unit + "\n[Service]\nNoSuchSetting=1\n") + "' 2>&1");
  if (broken.out.find("NoSuchSetting") == std::string::npos) {
    GTEST_SKIP() << "systemd-analyze cannot verify units in this environment: " << broken.out;
  }
  Result r = Shell("systemd-analyze verify '" + write_unit(unit) + "' 2>&1");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "") << "warnings from systemd-analyze verify";
}

// The unit's stop timeout leaves tesserad its drain-timeout plus a margin to stop workers.
TEST_F(DeployTest, UnitStopsGracefullyWithinTheDrainTimeout) {
  std::string unit = ReadAll(src_ / "deploy/systemd/tesserad.service");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(unit, m, std::regex(R"(\nTimeoutStopSec=(\d+)s\n)")));
  int stop_s = std::stoi(m[1]);
  double drain_s = absl::ToDoubleSeconds(config::DefaultDaemonConfig().drain_timeout);
  EXPECT_GE(stop_s, drain_s + 10) << "TimeoutStopSec must exceed drain-timeout with a margin";
  for (const char* line :
       {"\nExecStart=/usr/local/bin/tesserad --config /etc/tessera/tesserad.yaml\n",
        "\nKillSignal=SIGTERM\n", "\nRestart=on-failure\n", "\nLimitMEMLOCK=infinity\n",
        "\nNoNewPrivileges=yes\n", "\nProtectSystem=strict\n", "\nProtectHome=yes\n",
        "\nPrivateTmp=yes\n", "\nReadOnlyPaths=-/models\n", "\nStandardOutput=journal\n"}) {
    EXPECT_THAT(unit, HasSubstr(line));
  }
  EXPECT_THAT(unit, ::testing::Not(HasSubstr("Type=notify")));  // no sd_notify in tesserad
}

TEST_F(DeployTest, DryRunCpuPlan) {
  fs::create_directories(tmp_ / "models");
  std::ofstream(tmp_ / "models" / "m.gguf") << "x";
  std::string out;
  auto kinds = DryRunKinds("--name t1 --gpus none --model-dir '" + (tmp_ / "models").string() +
                               "' --model m.gguf --http-port 8081 --grpc-port 50052",
                           &out);
  EXPECT_THAT(kinds,
              ElementsAreArray({"create-container", "configure-container", "bind-model-dir",
                                "start-container", "wait-network", "build-tessera", "create-user",
                                "write-config", "install-unit", "check-config", "start-service",
                                "wait-ready", "print-endpoints"}));
  EXPECT_THAT(out, HasSubstr("/models/m.gguf"));
  EXPECT_THAT(out, HasSubstr("8081"));
  // Without a model the embedded default model is served: no bind mount.
  auto bare = DryRunKinds("");
  EXPECT_EQ(std::count(bare.begin(), bare.end(), "bind-model-dir"), 0);
  EXPECT_EQ(bare.front(), "create-container");
  EXPECT_EQ(bare.back(), "print-endpoints");
}

TEST_F(DeployTest, DryRunGpuPlanPassesDevicesThroughBeforeStarting) {
  fs::create_directories(tmp_ / "models");
  std::ofstream(tmp_ / "models" / "glm-00001-of-00002.gguf") << "x";
  std::ofstream(tmp_ / "key") << "k\n";
  std::string out;
  auto kinds = DryRunKinds("--name t2 --gpus 0,1,2,3 --model-dir '" + (tmp_ / "models").string() +
                               "' --model glm-00001-of-00002.gguf --api-key-file '" +
                               (tmp_ / "key").string() + "'",
                           &out);
  EXPECT_THAT(kinds,
              ElementsAreArray({"create-container", "configure-container", "bind-model-dir",
                                "gpu-passthrough", "gpu-driver", "start-container", "wait-network",
                                "build-tessera", "create-user", "write-config", "install-api-key",
                                "install-unit", "check-config", "start-service", "wait-ready",
                                "print-endpoints"}));
  EXPECT_THAT(out, HasSubstr("tp=4"));
  EXPECT_THAT(out, HasSubstr("/dev/nvidia3"));
}

// Prebuilt binaries: their runtime libraries, then the binaries, and no build; the
// container from a Debian mirror when one is named.
TEST_F(DeployTest, DryRunWithBinariesInstallsRuntimeOnly) {
  fs::create_directories(tmp_ / "bin");
  for (const char* b : {"tesserad", "tessera-worker", "tessera"}) {
    fs::copy_file("/bin/true", tmp_ / "bin" / b);
  }
  std::string out;
  auto kinds = DryRunKinds(
      "--binaries '" + (tmp_ / "bin").string() + "' --mirror http://mirror.example/debian", &out);
  EXPECT_THAT(
      kinds, ElementsAreArray({"create-container", "configure-container", "start-container",
                               "wait-network", "install-runtime", "install-binaries", "create-user",
                               "write-config", "install-unit", "check-config", "start-service",
                               "wait-ready", "print-endpoints"}));
  EXPECT_THAT(out, HasSubstr("template=debian mirror=http://mirror.example/debian"));
  EXPECT_THAT(out, HasSubstr((tmp_ / "bin").string()));
  // The download template is the default without a mirror.
  std::string plain;
  DryRunKinds("", &plain);
  EXPECT_THAT(plain, HasSubstr("template=download"));
}

// Without LXC (or the GPU driver), a real run stops before doing anything and says why;
// every missing piece is reported at once.
TEST_F(DeployTest, RealRunNamesWhatIsMissing) {
  if (HaveTool("lxc-create") && HaveTool("nvidia-smi")) {
    GTEST_SKIP() << "LXC and a GPU driver are installed here";
  }
  Result r = Shell((src_ / "deploy/lxc/deploy.sh").string() + " --gpus 0 2>&1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("[action]")));
  if (!HaveTool("lxc-create")) {
    EXPECT_THAT(r.out, HasSubstr("LXC is not installed"));
  }
  if (!HaveTool("nvidia-smi")) {
    EXPECT_THAT(r.out, HasSubstr("nvidia-smi is not found"));
  }
}

TEST_F(DeployTest, BadOptionsAreUsageErrors) {
  std::string script = (src_ / "deploy/lxc/deploy.sh").string();
  EXPECT_EQ(Shell(script + " --dry-run --http-port 70000 2>/dev/null").rc, 2);
  EXPECT_EQ(Shell(script + " --dry-run --gpus 0,x 2>/dev/null").rc, 2);
  EXPECT_EQ(Shell(script + " --dry-run --model m.gguf 2>/dev/null").rc, 2);
  EXPECT_EQ(Shell(script + " --dry-run --bogus 2>/dev/null").rc, 2);
  EXPECT_EQ(Shell(script + " --dry-run --template docker 2>/dev/null").rc, 2);
  EXPECT_EQ(Shell(script + " --dry-run --template download --mirror http://m/d 2>/dev/null").rc, 2);
  EXPECT_EQ(Shell(script + " --dry-run --mirror 'not a url' 2>/dev/null").rc, 2);
  Result help = Shell(script + " --help");
  EXPECT_EQ(help.rc, 0);
  for (const char* opt :
       {"--name", "--gpus", "--model-dir", "--model", "--http-port", "--grpc-port",
        "--api-key-file", "--template", "--mirror", "--binaries", "--dry-run", "--help"}) {
    EXPECT_THAT(help.out, HasSubstr(std::string("  ") + opt + " ")) << opt;
  }
}

}  // namespace
}  // namespace tessera
