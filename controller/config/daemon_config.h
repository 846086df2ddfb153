// tesserad's configuration: the typed values the daemon runs with, read from a YAML file
// (`--config FILE`) with command-line flags applied over it, then TESSERA_API_KEY.
//
// Every option is one row of the table in options.cc (name = flag without dashes = YAML
// key, type, default, section, help); `--help` and docs/configuration.md are generated
// from that table, so the three never disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::config {

struct DaemonConfig {
  // --- model ---
  std::string model;             // empty: the embedded default model
  std::string model_name;        // empty: the file's general.name, else its stem
  std::string config_file;       // the YAML file read, empty when none
  bool check = false;            // validate config and model metadata, then exit
  std::string chat_template;     // file overriding the model's template; empty: none
  std::string tool_call_parser;  // auto (from the template), none, or a format name
  std::string reasoning_parser;  // think or none
  std::string cache_dir;         // resolved: $XDG_CACHE_HOME/tessera or ~/.cache/tessera
  // --- server ---
  std::string host;
  int64_t http_port = 0;
  int64_t grpc_port = 0;
  // The key clients must send. Resolved: api-key, else the first line of api-key-file, else
  // $TESSERA_API_KEY; empty means no authentication.
  std::string api_key;
  std::string api_key_file;
  bool disable_metrics = false;
  std::vector<std::string> allowed_origins;  // CORS; empty: none
  // --- parallelism ---
  int64_t tp = 1;
  int64_t cpu_workers = 0;                        // 0: tp workers on CPU when no GPU is found
  int64_t threads_per_worker = 0;                 // 0: cores / workers
  std::string cpu_collectives = "shared-memory";  // shared-memory | gloo
  std::vector<std::string> gpus;  // CUDA device numbers; empty: the first tp visible
  bool external_workers = false;
  std::string control_host;
  int64_t control_port = 0;   // 0: ephemeral
  std::string worker_binary;  // resolved: tessera-worker beside this executable
  std::string dtype;          // auto | float32 | bfloat16 | float16
  bool exact = false;
  bool batch_invariant = true;
  std::string repack_weights = "auto";   // auto | on | off
  std::string expert_parallel = "auto";  // auto | on | off
  // --- scheduling and limits ---
  int64_t max_model_len = 0;  // 0: the model's context length
  int64_t kv_block_size = 0;
  int64_t kv_cache_tokens = 0;  // 0: as many as memory allows
  double gpu_memory_utilization = 0;
  int64_t max_num_seqs = 0;
  int64_t max_num_batched_tokens = 0;
  int64_t max_waiting_requests = 0;
  int64_t max_prompt_tokens = 0;  // 0: max-model-len
  uint64_t max_prompt_bytes = 0;  // 0: 32 x max-prompt-tokens
  int64_t max_chat_messages = 0;  // 0: max-prompt-tokens
  int64_t prep_threads = 0;       // 0: CPUs / 4, 1 to 8
  bool parse_special_in_content = false;
  bool enable_prefix_caching = true;
  bool overlap_delivery = true;
  std::string speculative;             // none | ngram | mtp
  int64_t num_speculative_tokens = 0;  // drafts per decode
  int64_t ngram_min = 0;               // n-gram lengths looked up
  int64_t ngram_max = 0;
  int64_t max_tokens_default = 0;  // 0: up to the context length (as vLLM)
  uint64_t max_body_size = 0;      // bytes
  absl::Duration request_timeout;
  absl::Duration drain_timeout;
  // --- workers and supervision ---
  absl::Duration rendezvous_timeout;
  absl::Duration heartbeat_interval;
  absl::Duration heartbeat_timeout;
  int64_t max_worker_restarts = 0;
  absl::Duration restart_backoff;
  absl::Duration restart_backoff_max;
  // --- logging ---
  std::string log_format;  // text | json
  std::string log_level;   // debug | info | warning | error

  // Set by --help / --version: the caller prints DaemonHelpText() (or its version) and
  // exits 0; nothing else was validated.
  bool show_help = false;
  bool show_version = false;
};

// Every option at its default (with the environment-dependent defaults resolved).
DaemonConfig DefaultDaemonConfig();

// Reads `--config FILE` (YAML) when given, applies the other flags over it (`--flag value`,
// `--flag=value`; booleans as `--flag` / `--no-flag`), then resolves the API key and the
// computed defaults, and validates every range. Errors name the file and line, or the flag,
// the option and what was expected; unknown keys and flags are errors that suggest the
// nearest option. argv[0] is the program name and is skipped.
absl::StatusOr<DaemonConfig> LoadDaemonConfig(int argc, char** argv);
absl::StatusOr<DaemonConfig> LoadDaemonConfig(const std::vector<std::string>& args_after_argv0);

// The checks LoadDaemonConfig runs last (ranges and options that contradict each other).
absl::Status ValidateDaemonConfig(const DaemonConfig& config);

// `tesserad --help`, generated from the option table, grouped by section.
std::string DaemonHelpText();

// The full text of docs/configuration.md, generated from the option table.
std::string ConfigReferenceMarkdown();

// A YAML file setting every option to its current value in `config` (for `--check` output
// and for tests); keys in table order. A set api-key is written as ******** (never echoed).
std::string DaemonConfigToYaml(const DaemonConfig& config);

}  // namespace tessera::config
