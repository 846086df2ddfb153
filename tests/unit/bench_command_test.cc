// `tessera bench` against a real tesserad process (the embedded default model) on free
// loopback ports: every request of a run is counted, 8 requests x 8 tokens = 64 generated
// tokens, percentiles ordered; and the errors a user meets (no server, wrong key) name the
// problem. Skips when TESSERA_TESSERAD_BINARY (set by ctest) is absent.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/bench_load.h"
#include "tools/commands.h"

extern char** environ;

namespace tessera::cli {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A port nobody listens on right now (the kernel's pick for an ephemeral bind).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// A tesserad child process serving the embedded default model from a private cache dir.
class Daemon {
 public:
  ~Daemon() { Stop(); }

  // Empty on success, else why the daemon did not become ready.
  std::string Start(const std::string& binary, const std::vector<std::string>& extra) {
    char pattern[] = "/tmp/tessera_bench_test.XXXXXX";
    if (mkdtemp(pattern) == nullptr) return "mkdtemp failed";
    dir_ = pattern;
    http_port_ = FreePort();
    const int grpc_port = FreePort();
    std::vector<std::string> args = {binary,
                                     "--cache-dir",
                                     dir_,
                                     "--http-port",
                                     std::to_string(http_port_),
                                     "--grpc-port",
                                     std::to_string(grpc_port),
                                     "--threads-per-worker",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string log = dir_ + "/tesserad.log";
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = 0;
      return "cannot start " + binary;
    }
    bench::ServerAddress server{"127.0.0.1", std::to_string(http_port_), ""};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return "tesserad exited early; its log is " + log;
      }
      if (bench::HttpGet(server, "/ready", "", 2.0).status == 200) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "tesserad was not ready within 20 s; its log is " + log;
  }

  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (waitpid(pid_, &status, WNOHANG) == 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
      }
      pid_ = 0;
    }
    if (!dir_.empty()) {
      std::error_code ignored;
      fs::remove_all(dir_, ignored);
      dir_.clear();
    }
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(http_port_); }

 private:
  pid_t pid_ = 0;
  int http_port_ = 0;
  std::string dir_;
};

const char* TesseradBinary() {
  const char* path = std::getenv("TESSERA_TESSERAD_BINARY");
  return path != nullptr && access(path, X_OK) == 0 ? path : nullptr;
}

struct BenchRun {
  int exit_code = 0;
  std::string out, err;
};

BenchRun Bench(const Args& args) {
  BenchRun run;
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  run.exit_code = RunBench(args);
  run.out = testing::internal::GetCapturedStdout();
  run.err = testing::internal::GetCapturedStderr();
  return run;
}

void ExpectOrdered(const json& p, const std::string& name) {
  ASSERT_TRUE(p.is_object()) << name;
  EXPECT_GT(p["p50"].get<double>(), 0.0) << name;
  EXPECT_LE(p["p50"].get<double>(), p["p90"].get<double>()) << name;
  EXPECT_LE(p["p90"].get<double>(), p["p99"].get<double>()) << name;
}

class BenchCommandTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (TesseradBinary() == nullptr) return;
    daemon_ = new Daemon();
    start_error_ = daemon_->Start(TesseradBinary(), {});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    if (TesseradBinary() == nullptr) {
      GTEST_SKIP() << "TESSERA_TESSERAD_BINARY is not set to a built tesserad";
    }
    ASSERT_EQ(start_error_, "");
  }

  // 8 requests of 8 tokens from 4 clients, as JSON.
  json RunEight(bool stream, bool logprobs = false) {
    Args args = {
        "--url",        daemon_->url(), "--concurrency", "4", "--requests", "8", "--gen-len", "8",
        "--prompt-len", "32",           "--json"};
    if (stream) args.push_back("--stream");
    if (logprobs) args.push_back("--logprobs");
    const BenchRun run = Bench(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    json out = json::parse(run.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(out.is_object()) << run.out;
    return out;
  }

  static Daemon* daemon_;
  static std::string start_error_;
};

Daemon* BenchCommandTest::daemon_ = nullptr;
std::string BenchCommandTest::start_error_;

TEST_F(BenchCommandTest, StreamingRunCountsEveryTokenAndTimesEachChunk) {
  const json out = RunEight(/*stream=*/true);
  ASSERT_TRUE(out.is_object());
  EXPECT_EQ(out["ok"], 8);
  EXPECT_EQ(out["failed"], 0);
  EXPECT_EQ(out["completion_tokens"], 64);  // 8 requests x 8 tokens (ignore_eos)
  EXPECT_GT(out["prompt_tokens"].get<int64_t>(), 0);
  ExpectOrdered(out["ttft_ms"], "ttft_ms");
  ExpectOrdered(out["itl_ms"], "itl_ms");
  ExpectOrdered(out["e2e_ms"], "e2e_ms");
  // The first token comes before the last one.
  EXPECT_LE(out["ttft_ms"]["p50"].get<double>(), out["e2e_ms"]["p99"].get<double>());
  EXPECT_GT(out["generated_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(out["prompt_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(out["requests_per_s"].get<double>(), 0.0);
}

TEST_F(BenchCommandTest, LogprobsStreamAnEventPerTokenSoEveryGapIsTimed) {
  const json out = RunEight(/*stream=*/true, /*logprobs=*/true);
  ASSERT_TRUE(out.is_object());
  EXPECT_EQ(out["ok"], 8);
  EXPECT_EQ(out["completion_tokens"], 64);
  EXPECT_EQ(out["ttft_ms"]["count"], 8);
  EXPECT_EQ(out["itl_ms"]["count"], 8 * (8 - 1));  // 7 gaps between 8 tokens, per request
  ExpectOrdered(out["itl_ms"], "itl_ms");
}

TEST_F(BenchCommandTest, NonStreamingRunReportsEndToEndOnly) {
  const json out = RunEight(/*stream=*/false);
  ASSERT_TRUE(out.is_object());
  EXPECT_EQ(out["ok"], 8);
  EXPECT_EQ(out["completion_tokens"], 64);
  EXPECT_TRUE(out["ttft_ms"].is_null());
  EXPECT_TRUE(out["itl_ms"].is_null());
  ExpectOrdered(out["e2e_ms"], "e2e_ms");
  EXPECT_GT(out["generated_tokens_per_s"].get<double>(), 0.0);
}

TEST_F(BenchCommandTest, TableNamesEveryFigure) {
  const BenchRun run = Bench({"--url", daemon_->url(), "--concurrency", "2", "--requests", "2",
                              "--gen-len", "4", "--prompt-len", "8", "--stream"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  for (const char* word : {"ok 2, failed 0", "TTFT", "ITL", "E2E", "generated", "tok/s",
                           "requests/s", "8 completion tokens"}) {
    EXPECT_NE(run.out.find(word), std::string::npos) << word << " missing from:\n" << run.out;
  }
}

TEST_F(BenchCommandTest, MultiTurnConversationsReuseTheirEarlierTurns) {
  // 3 conversations x 4 turns; each turn resends the previous prompt and answer. The
  // daemon's prefix cache (on by default) serves the earlier turns: cached tokens counted.
  const BenchRun run =
      Bench({"--url", daemon_->url(), "--concurrency", "3", "--turns", "4", "--conversations", "3",
             "--gen-len", "8", "--prompt-len", "24", "--stream", "--logprobs", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json out = json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(out.is_object()) << run.out;
  EXPECT_EQ(out["requests"], 12);
  EXPECT_EQ(out["ok"], 12);
  EXPECT_EQ(out["completion_tokens"], 12 * 8);
  ASSERT_TRUE(out["by_turn"].is_array());
  ASSERT_EQ(out["by_turn"].size(), 4u);
  for (const json& t : out["by_turn"]) EXPECT_EQ(t["ttft_ms"]["count"], 3) << t.dump();
  // Turn 4 of a conversation holds ~3 x (24 + 8) + 24 prompt tokens: the prompts grow.
  const int64_t prompt = out["prompt_tokens"].get<int64_t>();
  EXPECT_GT(prompt, 3 * (24 + 48 + 72 + 96) * 8 / 10) << "prompts do not carry the history";
  EXPECT_GT(out["cached_tokens"].get<int64_t>(), 0);
  EXPECT_LT(out["cached_tokens"].get<int64_t>(), prompt);
}

TEST_F(BenchCommandTest, SharedPrefixPromptsHitTheCache) {
  const BenchRun run =
      Bench({"--url", daemon_->url(), "--concurrency", "1", "--requests", "4", "--shared-prefix",
             "64", "--prompt-len", "8", "--gen-len", "2", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json out = json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(out.is_object()) << run.out;
  EXPECT_EQ(out["ok"], 4);
  EXPECT_GT(out["shared_prefix_words"].get<int>(), 0);
  // One client: the first request computes the system prompt, the next three find its
  // full blocks (it is about 64 tokens, as scaled from words: at least 2 blocks of 16).
  EXPECT_GE(out["cached_tokens"].get<int64_t>(), 3 * 32);
  EXPECT_EQ(out["cached_tokens"].get<int64_t>() % 16, 0);
}

TEST(BenchCommandErrorsTest, ModeFlagsAreChecked) {
  EXPECT_EQ(
      Bench({"--url", "http://127.0.0.1:1", "--turns", "3", "--shared-prefix", "8"}).exit_code, 2);
  EXPECT_EQ(Bench({"--url", "http://127.0.0.1:1", "--conversations", "3"}).exit_code, 2);
  EXPECT_EQ(Bench({"--url", "http://127.0.0.1:1", "--turn-len", "3"}).exit_code, 2);
  EXPECT_EQ(Bench({"--url", "http://127.0.0.1:1", "--turns", "3", "--requests", "9"}).exit_code, 2);
}

TEST_F(BenchCommandTest, UnknownModelFailsEveryRequestWithTheServersMessage) {
  const BenchRun run = Bench(
      {"--url", daemon_->url(), "--model", "no-such-model", "--requests", "2", "--gen-len", "2"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("HTTP 404"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("no-such-model"), std::string::npos) << run.err;
}

TEST(BenchCommandErrorsTest, NoServerSaysCannotConnect) {
  const std::string url = "http://127.0.0.1:" + std::to_string(FreePort());
  const BenchRun run = Bench({"--url", url, "--requests", "1"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("cannot connect to " + url), std::string::npos) << run.err;
}

TEST(BenchCommandErrorsTest, WrongApiKeyIs401WithTheBodysMessage) {
  if (TesseradBinary() == nullptr) GTEST_SKIP() << "TESSERA_TESSERAD_BINARY is not set";
  Daemon daemon;
  ASSERT_EQ(daemon.Start(TesseradBinary(), {"--api-key", "right-key"}), "");
  const BenchRun wrong =
      Bench({"--url", daemon.url(), "--api-key", "wrong-key", "--requests", "1", "--gen-len", "1"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("HTTP 401"), std::string::npos) << wrong.err;
  const BenchRun right = Bench({"--url", daemon.url(), "--api-key", "right-key", "--requests", "1",
                                "--gen-len", "2", "--json"});
  EXPECT_EQ(right.exit_code, 0) << right.err;
  const json out = json::parse(right.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(out.is_object()) << right.out;
  EXPECT_EQ(out["completion_tokens"], 2);
}

TEST(BenchCommandErrorsTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Bench({}).exit_code, 2);
  EXPECT_EQ(Bench({"--url", "https://example.com"}).exit_code, 2);
  EXPECT_EQ(Bench({"--url", "http://127.0.0.1:1", "--concurrency", "0"}).exit_code, 2);
  EXPECT_EQ(Bench({"--url", "http://127.0.0.1:99999"}).exit_code, 2);
}

TEST(ParseServerUrlTest, SplitsHostPortAndPrefix) {
  auto a = bench::ParseServerUrl("http://127.0.0.1:8080/v1/");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "8080");
  EXPECT_EQ(a->path_prefix, "");
  auto b = bench::ParseServerUrl("http://example.com/api");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->port, "80");
  EXPECT_EQ(b->path_prefix, "/api");
  auto c = bench::ParseServerUrl("http://[::1]:9000");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->ToString(), "http://[::1]:9000");
  EXPECT_FALSE(bench::ParseServerUrl("localhost:8080").ok());
}

TEST(MakePromptTest, HasTheAskedWordCountAndDependsOnTheSeed) {
  const std::string p = bench::MakePrompt(128, 7);
  EXPECT_EQ(std::count(p.begin(), p.end(), ' '), 127);
  EXPECT_EQ(p, bench::MakePrompt(128, 7));
  EXPECT_NE(p, bench::MakePrompt(128, 8));
}

}  // namespace
}  // namespace tessera::cli
