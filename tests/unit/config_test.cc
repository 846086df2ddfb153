#include "controller/config/daemon_config.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/model/constants.h"
#include "controller/config/options.h"
#include "controller/config/units.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::config {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_config_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ::unsetenv("TESSERA_API_KEY");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  // Loads with --config FILE (when `yaml` is non-empty) followed by `flags`.
  absl::StatusOr<DaemonConfig> Load(const std::string& yaml, std::vector<std::string> flags = {}) {
    std::vector<std::string> args;
    if (!yaml.empty()) args = {"--config", Write("c.yaml", yaml)};
    args.insert(args.end(), flags.begin(), flags.end());
    return LoadDaemonConfig(args);
  }
  std::string Error(const std::string& yaml, std::vector<std::string> flags = {}) {
    auto c = Load(yaml, std::move(flags));
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : std::string(c.status().message());
  }

  fs::path dir_;
};

TEST_F(ConfigTest, DefaultsAreTheDocumentedOnes) {
  auto c = Load("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, "");
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->http_port, 8080);
  EXPECT_EQ(c->grpc_port, 50051);
  EXPECT_EQ(c->tp, 1);
  EXPECT_EQ(c->cpu_workers, 0);
  EXPECT_TRUE(c->gpus.empty());
  EXPECT_EQ(c->control_host, "127.0.0.1");
  EXPECT_EQ(c->dtype, "auto");
  EXPECT_FALSE(c->exact);
  EXPECT_FALSE(c->check);
  EXPECT_EQ(c->kv_block_size, 16);
  // The option table's default is the one workers and executors fall back to.
  EXPECT_EQ(c->kv_block_size, model::kDefaultKvBlockSize);
  EXPECT_DOUBLE_EQ(c->gpu_memory_utilization, 0.9);
  EXPECT_EQ(c->max_num_seqs, 64);
  EXPECT_EQ(c->max_num_batched_tokens, 512);
  EXPECT_EQ(c->max_waiting_requests, 256);
  EXPECT_EQ(c->max_body_size, 8u * 1024 * 1024);
  EXPECT_EQ(c->request_timeout, absl::Seconds(600));
  EXPECT_EQ(c->drain_timeout, absl::Seconds(30));
  EXPECT_EQ(c->rendezvous_timeout, absl::Seconds(60));
  EXPECT_EQ(c->heartbeat_interval, absl::Milliseconds(500));
  EXPECT_EQ(c->heartbeat_timeout, absl::Seconds(5));
  EXPECT_EQ(c->max_worker_restarts, 5);
  EXPECT_EQ(c->restart_backoff, absl::Seconds(1));
  EXPECT_EQ(c->restart_backoff_max, absl::Seconds(30));
  EXPECT_EQ(c->log_format, "text");
  EXPECT_EQ(c->log_level, "info");
  EXPECT_EQ(c->api_key, "");
  EXPECT_FALSE(c->worker_binary.empty());
  EXPECT_THAT(c->worker_binary, ::testing::EndsWith("/tessera-worker"));
}

TEST_F(ConfigTest, EveryTableDefaultParsesAndFieldMatchesType) {
  for (const OptionSpec& opt : DaemonOptions()) {
    DaemonConfig c;
    EXPECT_TRUE(ApplyOptionText(opt, opt.default_value, &c).ok()) << opt.name;
    size_t want = 0;
    switch (opt.type) {
      case OptionType::kString:
      case OptionType::kEnum:
        want = 0;
        break;
      case OptionType::kInt:
        want = 1;
        break;
      case OptionType::kDouble:
        want = 2;
        break;
      case OptionType::kBool:
        want = 3;
        break;
      case OptionType::kSize:
        want = 4;
        break;
      case OptionType::kDuration:
        want = 5;
        break;
      case OptionType::kList:
        want = 6;
        break;
    }
    EXPECT_EQ(opt.field.index(), want) << opt.name;
    EXPECT_NE(std::string(opt.help), "") << opt.name;
    EXPECT_EQ(FindOption(opt.name), &opt) << opt.name << " is declared twice";
  }
}

TEST_F(ConfigTest, FlagsOverrideTheFileInEitherOrder) {
  const std::string yaml =
      "model: /m/a.gguf\n"
      "http-port: 9000\n"
      "grpc-port: 9001\n"
      "tp: 2\n"
      "exact: true\n"
      "gpus: [0, 1, 2]\n"
      "drain-timeout: 45s\n"
      "max-body-size: 16MiB\n"
      "gpu-memory-utilization: 0.8\n";
  auto c = Load(yaml, {"--http-port", "7000", "--no-exact", "--gpus=3,4", "--tp=2"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, "/m/a.gguf");  // from the file
  EXPECT_EQ(c->http_port, 7000);     // flag wins
  EXPECT_EQ(c->grpc_port, 9001);
  EXPECT_FALSE(c->exact);
  EXPECT_EQ(c->gpus, (std::vector<std::string>{"3", "4"}));
  EXPECT_EQ(c->drain_timeout, absl::Seconds(45));
  EXPECT_EQ(c->max_body_size, 16u << 20);
  EXPECT_DOUBLE_EQ(c->gpu_memory_utilization, 0.8);

  // --config after the flags: the flags still win.
  auto d = LoadDaemonConfig(
      std::vector<std::string>{"--http-port=7001", "--config", (dir_ / "c.yaml").string()});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->http_port, 7001);
  EXPECT_TRUE(d->exact);
  EXPECT_EQ(d->config_file, (dir_ / "c.yaml").string());
}

TEST_F(ConfigTest, BooleanFlagForms) {
  EXPECT_TRUE(Load("", {"--exact"})->exact);
  EXPECT_TRUE(Load("", {"--exact=true"})->exact);
  EXPECT_FALSE(Load("", {"--exact=no"})->exact);
  EXPECT_FALSE(Load("exact: yes\n", {"--no-exact"})->exact);
  EXPECT_TRUE(Load("exact: on\n")->exact);
  EXPECT_THAT(Error("", {"--no-exact=1"}), HasSubstr("takes no value"));
  EXPECT_THAT(Error("", {"--exact=maybe"}), HasSubstr("--exact: expected a boolean"));
  // --no- only negates booleans (and auto|on|off options, below).
  EXPECT_THAT(Error("", {"--no-tp"}), HasSubstr("unknown flag --no-tp"));
}

TEST_F(ConfigTest, OnOffOptionsTakeBareFlags) {
  EXPECT_EQ(Load("", {})->expert_parallel, "auto");
  EXPECT_EQ(Load("", {"--expert-parallel"})->expert_parallel, "on");
  EXPECT_EQ(Load("", {"--expert-parallel", "--tp", "2"})->expert_parallel, "on");
  EXPECT_EQ(Load("", {"--expert-parallel", "--tp", "2"})->tp, 2);
  EXPECT_EQ(Load("", {"--expert-parallel", "off"})->expert_parallel, "off");
  EXPECT_EQ(Load("", {"--expert-parallel=auto"})->expert_parallel, "auto");
  EXPECT_EQ(Load("expert-parallel: on\n", {"--no-expert-parallel"})->expert_parallel, "off");
  EXPECT_THAT(Error("", {"--no-expert-parallel=on"}), HasSubstr("takes no value"));
  EXPECT_THAT(Error("", {"--expert-parallel", "maybe"}), HasSubstr("auto|on|off"));
}

TEST_F(ConfigTest, ValuesOfEachType) {
  auto c = Load(
      "model-name: 'glm:5'\n"
      "dtype: bfloat16\n"
      "max-model-len: 8192\n"
      "request-timeout: 1m30s\n"
      "heartbeat-interval: 250ms\n"
      "max-body-size: 1.5MiB\n"
      "gpus: '0,1'\n"
      "api-key:\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_name, "glm:5");
  EXPECT_EQ(c->dtype, "bfloat16");
  EXPECT_EQ(c->max_model_len, 8192);
  EXPECT_EQ(c->request_timeout, absl::Seconds(90));
  EXPECT_EQ(c->heartbeat_interval, absl::Milliseconds(250));
  EXPECT_EQ(c->max_body_size, 1572864u);
  EXPECT_EQ(c->gpus, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(c->api_key, "");
}

TEST_F(ConfigTest, SizesAndDurations) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("8MiB"), 8u << 20);
  EXPECT_EQ(*ParseSize("8mib"), 8u << 20);
  EXPECT_EQ(*ParseSize("2G"), 2000000000u);  // llama-gguf-split's reading
  EXPECT_EQ(*ParseSize("1GB"), 1000000000u);
  EXPECT_EQ(*ParseSize("1KiB"), 1024u);
  EXPECT_EQ(*ParseSize("0.5K"), 500u);
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_FALSE(ParseSize("MiB").ok());
  EXPECT_FALSE(ParseSize("-1").ok());
  EXPECT_FALSE(ParseSize("12XB").ok());
  EXPECT_FALSE(ParseSize("0.3B").ok());
  EXPECT_FALSE(ParseSize("99999999999T").ok());
  EXPECT_EQ(FormatSize(8u << 20), "8MiB");
  EXPECT_EQ(FormatSize(2000000000u), "2GB");
  EXPECT_EQ(FormatSize(4097), "4097");
  EXPECT_EQ(*ParseDurationText("500ms"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseDurationText("0"), absl::ZeroDuration());
  EXPECT_FALSE(ParseDurationText("30").ok());  // a unit is required
  EXPECT_FALSE(ParseDurationText("-1s").ok());
  EXPECT_FALSE(ParseDurationText("inf").ok());
  EXPECT_EQ(FormatDurationText(absl::Milliseconds(500)), "500ms");
  EXPECT_EQ(FormatDurationText(absl::Seconds(90)), "1m30s");
}

TEST_F(ConfigTest, FileErrorsNameFileLineKeyAndType) {
  std::string e = Error("host: 0.0.0.0\n\nhttp-port: eighty\n");
  EXPECT_THAT(e, HasSubstr("c.yaml:3: http-port: expected an integer, got 'eighty'"));
  e = Error("tp: 2\nmax-body-size: lots\n");
  EXPECT_THAT(e, HasSubstr("c.yaml:2: max-body-size: expected a size"));
  e = Error("drain-timeout: 30\n");
  EXPECT_THAT(e, HasSubstr("c.yaml:1: drain-timeout: expected a duration"));
  e = Error("log-level: verbose\n");
  EXPECT_THAT(e, HasSubstr("expected one of debug|info|warning|error, got 'verbose'"));
  e = Error("tp: [1, 2]\n");
  EXPECT_THAT(e, HasSubstr("c.yaml:1: tp: expected a integer, got a list"));
  e = Error("gpus: {a: 1}\n");
  EXPECT_THAT(e, HasSubstr("gpus: expected a list of strings, got a mapping"));
}

TEST_F(ConfigTest, UnknownKeysAndFlagsSuggestTheNearestOption) {
  std::string e = Error("tp: 1\nhttp_port: 80\n");
  EXPECT_THAT(e, HasSubstr("c.yaml:2: unknown option 'http_port' (did you mean http-port?)"));
  e = Error("", {"--max-model-length", "10"});
  EXPECT_THAT(e, HasSubstr("unknown flag --max-model-length (did you mean --max-model-len?)"));
  e = Error("", {"--zzzzzz"});
  EXPECT_EQ(e, "unknown flag --zzzzzz");
  e = Error("", {"model.gguf"});
  EXPECT_THAT(e, HasSubstr("unexpected argument 'model.gguf'"));
  EXPECT_THAT(e, HasSubstr("--model PATH"));
  e = Error("", {"--http-port"});
  EXPECT_THAT(e, HasSubstr("--http-port: needs a value (PORT, a integer)"));
  e = Error("config: other.yaml\n");
  EXPECT_THAT(e, HasSubstr("'config' can only be given on the command line"));
  e = Error("tp: 1\ntp: 2\n");
  EXPECT_THAT(e, HasSubstr("set twice"));
}

TEST_F(ConfigTest, SyntaxErrorsAndMissingFiles) {
  std::string e = Error("tp: 1\nhost: [unclosed\n");
  EXPECT_THAT(e, HasSubstr("c.yaml:"));
  EXPECT_THAT(e, HasSubstr("YAML syntax error"));
  e = Error("- a\n- b\n");
  EXPECT_THAT(e, HasSubstr("expected a mapping"));
  auto c = LoadDaemonConfig(std::vector<std::string>{"--config", (dir_ / "nope.yaml").string()});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("nope.yaml: not found"));
  // An empty file sets nothing.
  EXPECT_TRUE(Load("# only a comment\n").ok());
}

TEST_F(ConfigTest, RangesNameTheOption) {
  EXPECT_THAT(Error("http-port: 70000\n"),
              HasSubstr("http-port is 70000 but must be in [0, 65535]"));
  EXPECT_THAT(Error("", {"--tp", "0"}), HasSubstr("tp is 0 but must be in [1, 1024]"));
  EXPECT_THAT(Error("", {"--gpu-memory-utilization", "0"}),
              HasSubstr("gpu-memory-utilization is 0 but must be in (0, 1]"));
  EXPECT_THAT(Error("", {"--gpu-memory-utilization", "1.5"}),
              HasSubstr("gpu-memory-utilization is 1.5"));
  EXPECT_TRUE(Load("", {"--gpu-memory-utilization", "1"}).ok());
  EXPECT_THAT(Error("", {"--max-body-size", "10"}),
              HasSubstr("max-body-size is 10 but must be in [1KiB, 4GiB]"));
  EXPECT_THAT(Error("", {"--heartbeat-interval", "0s"}), HasSubstr("heartbeat-interval"));
  EXPECT_THAT(Error("", {"--control-port", "-1"}), HasSubstr("control-port is -1"));
}

TEST_F(ConfigTest, OptionsThatContradictEachOther) {
  EXPECT_THAT(Error("", {"--http-port", "9000", "--grpc-port", "9000"}),
              HasSubstr("http-port and grpc-port are both 9000"));
  EXPECT_THAT(Error("", {"--external-workers"}),
              HasSubstr("external-workers needs a fixed control-port"));
  EXPECT_TRUE(Load("", {"--external-workers", "--control-port", "29500"}).ok());
  EXPECT_THAT(Error("", {"--tp", "2", "--cpu-workers", "4"}),
              HasSubstr("tp is 2 but cpu-workers is 4"));
  EXPECT_TRUE(Load("", {"--tp", "4", "--cpu-workers", "4"}).ok());
  EXPECT_THAT(Error("", {"--tp", "4", "--gpus", "0,1"}),
              HasSubstr("gpus lists 2 device(s) but tp is 4"));
  EXPECT_THAT(Error("", {"--heartbeat-timeout", "400ms"}),
              HasSubstr("heartbeat-timeout (400ms) must be longer"));
  EXPECT_THAT(Error("", {"--restart-backoff", "1m"}), HasSubstr("restart-backoff (1m) is longer"));
  EXPECT_THAT(Error("", {"--max-model-len", "100", "--max-prompt-tokens", "200"}),
              HasSubstr("max-prompt-tokens 200 exceeds max-model-len 100"));
  EXPECT_THAT(Error("", {"--exact", "--dtype", "float16"}), HasSubstr("exact computes in float32"));
}

TEST_F(ConfigTest, ApiKeySources) {
  ::setenv("TESSERA_API_KEY", " from-env\n", 1);
  EXPECT_EQ(Load("")->api_key, "from-env");
  EXPECT_EQ(Load("", {"--api-key", "from-flag"})->api_key, "from-flag");
  std::string key_file = Write("key", "from-file  \nsecond line\n");
  EXPECT_EQ(Load("", {"--api-key-file", key_file})->api_key, "from-file");
  EXPECT_EQ(Load("api-key: from-yaml\n")->api_key, "from-yaml");
  // A flag overrides the file's source of the key, whichever it was.
  EXPECT_EQ(Load("api-key-file: " + key_file + "\n", {"--api-key", "k"})->api_key, "k");
  EXPECT_EQ(Load("api-key: y\n", {"--api-key-file", key_file})->api_key, "from-file");
  EXPECT_THAT(Error("", {"--api-key", "a", "--api-key-file", key_file}), HasSubstr("both set"));
  EXPECT_THAT(Error("", {"--api-key-file", (dir_ / "missing").string()}),
              HasSubstr("api-key-file"));
  ::unsetenv("TESSERA_API_KEY");
  EXPECT_EQ(Load("")->api_key, "");
}

TEST_F(ConfigTest, CacheDirFollowsXdg) {
  const char* old = std::getenv("XDG_CACHE_HOME");
  std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", "/var/cache/x", 1);
  EXPECT_EQ(Load("")->cache_dir, "/var/cache/x/tessera");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/op", 1);
  EXPECT_EQ(Load("")->cache_dir, "/home/op/.cache/tessera");
  EXPECT_EQ(Load("cache-dir: /srv/c\n")->cache_dir, "/srv/c");
  if (old) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
}

TEST_F(ConfigTest, HelpIsGeneratedFromTheTableGroupedBySection) {
  auto c = LoadDaemonConfig(std::vector<std::string>{"--tp", "0", "--help"});
  ASSERT_TRUE(c.ok());  // --help wins over anything else
  EXPECT_TRUE(c->show_help);
  std::string help = DaemonHelpText();
  size_t last = 0;
  for (const char* title : {"Model:", "Server:", "Parallelism and devices:",
                            "Scheduling and limits:", "Workers and supervision:", "Logging:"}) {
    size_t at = help.find(std::string("\n") + title + "\n");
    ASSERT_NE(at, std::string::npos) << title;
    EXPECT_GT(at, last) << title << " out of order";
    last = at;
  }
  for (const OptionSpec& opt : DaemonOptions()) {
    std::string flag = opt.type == OptionType::kBool ? std::string("--[no-]") + opt.name
                                                     : std::string("--") + opt.name + " ";
    EXPECT_THAT(help, HasSubstr("  " + flag)) << opt.name;
  }
  EXPECT_THAT(help, HasSubstr("--http-port PORT\n"));
  EXPECT_THAT(help, HasSubstr("[default: 8080]"));
  EXPECT_THAT(help, HasSubstr("auto|float32|bfloat16|float16"));
  // Nothing wider than 100 columns.
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 100u) << line;
}

TEST_F(ConfigTest, YamlDumpReadsBackToTheSameConfig) {
  auto c = Load("tp: 2\ngpus: [0, 1]\nmax-body-size: 3MiB\nheartbeat-timeout: 1m30s\n",
                {"--api-key", "secret"});
  ASSERT_TRUE(c.ok()) << c.status();
  std::string dump = DaemonConfigToYaml(*c);
  EXPECT_THAT(dump, ::testing::Not(HasSubstr("secret")));
  EXPECT_THAT(dump, HasSubstr("api-key: \"********\""));
  auto back = Load(dump, {"--api-key", "secret"});
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << dump;
  EXPECT_EQ(DaemonConfigToYaml(*back), dump);
  EXPECT_EQ(back->gpus, c->gpus);
  EXPECT_EQ(back->max_body_size, 3u << 20);
}

// docs/configuration.md is generated; this keeps the committed copy from drifting.
TEST_F(ConfigTest, CommittedReferenceEqualsTheGeneratedOne) {
  const char* src = std::getenv("TESSERA_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "TESSERA_SOURCE_DIR not set (run through ctest)";
  std::ifstream in(fs::path(src) / "docs" / "configuration.md");
  ASSERT_TRUE(in) << "docs/configuration.md is missing";
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_TRUE(committed.str() == ConfigReferenceMarkdown())
      << "docs/configuration.md differs from the option table; regenerate it with\n"
         "  cmake --build build/default --target tessera_config_docs &&\n"
         "  build/default/controller/config/tessera_config_docs > docs/configuration.md";
  for (const OptionSpec& opt : DaemonOptions()) {
    EXPECT_THAT(committed.str(), HasSubstr(std::string("| `") + opt.name + "` |"));
  }
}

// Every example under deploy/configs parses; the seed scenario says what the issue asks.
TEST_F(ConfigTest, DeployExamplesParse) {
  const char* src = std::getenv("TESSERA_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "TESSERA_SOURCE_DIR not set (run through ctest)";
  fs::path dir = fs::path(src) / "deploy" / "configs";
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++n;
    auto c = LoadDaemonConfig(std::vector<std::string>{"--config", entry.path().string()});
    EXPECT_TRUE(c.ok()) << entry.path() << ": " << c.status();
  }
  EXPECT_GE(n, 3);
  auto glm =
      LoadDaemonConfig(std::vector<std::string>{"--config", (dir / "glm5-8gpu.yaml").string()});
  ASSERT_TRUE(glm.ok()) << glm.status();
  EXPECT_EQ(glm->tp, 8);
  EXPECT_EQ(glm->max_model_len, 8192);
  EXPECT_DOUBLE_EQ(glm->gpu_memory_utilization, 0.9);
  EXPECT_THAT(glm->model, ::testing::EndsWith("-00001-of-00010.gguf"));
  EXPECT_EQ(glm->gpus.size(), 8u);
  auto multi =
      LoadDaemonConfig(std::vector<std::string>{"--config", (dir / "multi-host.yaml").string()});
  ASSERT_TRUE(multi.ok()) << multi.status();
  EXPECT_TRUE(multi->external_workers);
  EXPECT_EQ(multi->control_host, "0.0.0.0");
  auto cpu = LoadDaemonConfig(
      std::vector<std::string>{"--config", (dir / "cpu-single-host.yaml").string()});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_GT(cpu->cpu_workers, 0);
}

}  // namespace
}  // namespace tessera::config
