#include "controller/config/options.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "controller/config/units.h"

namespace tessera::config {
namespace {

using C = DaemonConfig;
using T = OptionType;
using S = Section;

constexpr Range Between(double lo, double hi) { return Range{lo, hi, false, true}; }
constexpr Range Above(double lo, double hi) { return Range{lo, hi, true, true}; }
constexpr double kPortMax = 65535;
constexpr double kIntMax = 2147483647;  // counts that travel as int32 on the control plane
constexpr double kDay = 86400;

// The table. Order is the order of `--help` and docs/configuration.md within a section.
const OptionSpec kOptions[] = {
    // --- model ---
    {"model", T::kString, S::kModel, "", "the embedded default model", "PATH",
     "GGUF model to serve: a single file, or any part of a split set "
     "(NAME-00001-of-00010.gguf); the other parts are found beside it.",
     &C::model},
    {"model-name", T::kString, S::kModel, "", "the file's general.name, else its file stem", "NAME",
     "Model name reported by /v1/models and expected in requests' `model` field.", &C::model_name},
    {"config", T::kString, S::kModel, "", "none", "FILE",
     "YAML file of options (keys spelled like the flags); flags given on the command line "
     "override it. Command line only.",
     &C::config_file},
    {"check", T::kBool, S::kModel, "false", "", "",
     "Validate the configuration and the model's metadata (architecture, tensors, shard "
     "plan), print the result and exit without starting workers.",
     &C::check},
    {"chat-template", T::kString, S::kModel, "", "none: the model's own template", "FILE",
     "Jinja2 chat template file used instead of the model's tokenizer.chat_template.",
     &C::chat_template},
    {"tool-call-parser",
     T::kEnum,
     S::kModel,
     "auto",
     "",
     "NAME",
     "How tool calls are read from chat output when a request sends `tools` (returned as "
     "message.tool_calls, finish_reason tool_calls): auto detects the format from the chat "
     "template; glm45, deepseek_v3, deepseek_v31, hermes, llama3_json or mistral name one; "
     "none returns calls as content.",
     &C::tool_call_parser,
     {},
     "auto|none|glm45|deepseek_v3|deepseek_v31|hermes|llama3_json|mistral"},
    {"reasoning-parser",
     T::kEnum,
     S::kModel,
     "think",
     "",
     "NAME",
     "think: a chat answer's <think>…</think> (also when the template's generation prompt "
     "opened it) is returned as message.reasoning_content / delta.reasoning_content; none: "
     "left in the content.",
     &C::reasoning_parser,
     {},
     "think|none"},
    {"cache-dir", T::kString, S::kModel, "", "$XDG_CACHE_HOME/tessera, else ~/.cache/tessera",
     "DIR", "Where the embedded default model is generated on first use.", &C::cache_dir},
    // --- server ---
    {"host", T::kString, S::kServer, "127.0.0.1", "", "HOST",
     "Address the HTTP and gRPC servers bind. Use 0.0.0.0 to accept remote clients (then set "
     "an API key).",
     &C::host},
    {"http-port", T::kInt, S::kServer, "8080", "", "PORT",
     "Port of the OpenAI-compatible REST API, /health, /ready and /metrics (0: ephemeral).",
     &C::http_port, Between(0, kPortMax)},
    {"grpc-port", T::kInt, S::kServer, "50051", "", "PORT",
     "Port of the gRPC API tessera.v1.Inference, with health and reflection (0: ephemeral).",
     &C::grpc_port, Between(0, kPortMax)},
    {"api-key", T::kString, S::kServer, "", "none: no authentication", "KEY",
     "Key clients must send (REST `Authorization: Bearer KEY`, gRPC `authorization` "
     "metadata); /health, /ready and /metrics stay open. When neither api-key nor "
     "api-key-file is set, the environment variable TESSERA_API_KEY is used. Prefer "
     "api-key-file: flags are visible to other local users.",
     &C::api_key},
    {"api-key-file", T::kString, S::kServer, "", "none", "FILE",
     "File whose first line is the API key (trailing whitespace ignored).", &C::api_key_file},
    {"disable-metrics", T::kBool, S::kServer, "false", "", "", "Do not serve /metrics.",
     &C::disable_metrics},
    {"allowed-origins", T::kList, S::kServer, "", "none: no cross-origin browser access", "ORIGINS",
     "Web origins (e.g. https://chat.example.com, or * for any) whose pages may call the REST "
     "API from a browser: answered with CORS headers, preflight requests included. Without "
     "it, browsers get no CORS headers, POST bodies must be sent as application/json, and a "
     "server bound to a loopback address refuses a Host header that is not a loopback name "
     "(DNS rebinding).",
     &C::allowed_origins},
    // --- parallelism ---
    {"tp", T::kInt, S::kParallelism, "1", "", "N",
     "Tensor-parallel size: the number of worker processes sharing each layer (one per GPU).",
     &C::tp, Between(1, 1024)},
    {"cpu-workers", T::kInt, S::kParallelism, "0", "0: tp workers on CPU when no GPU is found", "N",
     "Run N CPU workers (tensor parallel; see cpu-collectives) instead of GPU workers. Without "
     "it, a build with the CUDA backend that sees GPUs runs tp GPU workers (one per GPU, NCCL "
     "between them); otherwise tp CPU workers.",
     &C::cpu_workers, Between(0, 1024)},
    {"threads-per-worker", T::kInt, S::kParallelism, "0", "0: available cores / workers", "N",
     "Compute threads of each CPU worker; workers are pinned to disjoint cores where possible.",
     &C::threads_per_worker, Between(0, 4096)},
    {"cpu-collectives",
     T::kEnum,
     S::kParallelism,
     "shared-memory",
     "",
     "KIND",
     "How the CPU workers tesserad spawns exchange their partial sums (the all-reduces of "
     "tensor parallelism): shared-memory (one mapping for the group, a few microseconds per "
     "decode all-reduce) or gloo (TCP over loopback, hundreds of microseconds). External "
     "workers and GPU workers ignore it (Gloo and NCCL).",
     &C::cpu_collectives,
     {},
     "shared-memory|gloo"},
    {"gpus", T::kList, S::kParallelism, "", "the first tp visible GPUs", "IDS",
     "CUDA device numbers to use, as tesserad sees them (after CUDA_VISIBLE_DEVICES; "
     "comma-separated on the command line, a list in YAML); rank r runs on the r-th of the "
     "first tp. Each must exist. A build without the CUDA backend, or a host where no GPU is "
     "visible, warns and runs CPU workers. With external-workers, the numbers are the "
     "workers' devices on their hosts.",
     &C::gpus},
    {"external-workers", T::kBool, S::kParallelism, "false", "", "",
     "Do not spawn workers: wait for `tessera-worker --controller HOST:PORT --rank R` to join "
     "(multi-host). Needs a fixed control-port.",
     &C::external_workers},
    {"control-host", T::kString, S::kParallelism, "127.0.0.1", "", "HOST",
     "Address of the internal control service workers connect to; 0.0.0.0 for workers on "
     "other hosts.",
     &C::control_host},
    {"control-port", T::kInt, S::kParallelism, "0", "0: ephemeral", "PORT",
     "Port of the internal control service.", &C::control_port, Between(0, kPortMax)},
    {"worker-binary", T::kString, S::kParallelism, "", "tessera-worker beside tesserad", "PATH",
     "Worker executable to spawn.", &C::worker_binary},
    {"dtype",
     T::kEnum,
     S::kParallelism,
     "auto",
     "",
     "TYPE",
     "Compute dtype of activations and KV cache, independent of the weights' quant types "
     "(auto: bfloat16 activations and KV cache on GPUs; float32 activations and a float16 KV "
     "cache on CPU).",
     &C::dtype,
     {},
     "auto|float32|bfloat16|float16"},
    {"exact", T::kBool, S::kParallelism, "false", "", "",
     "Exact numeric path: float32 activations and KV cache, weights dequantized on the fly, "
     "no activation quantization. Slower; for checking results.",
     &C::exact},
    {"batch-invariant", T::kBool, S::kParallelism, "true", "", "",
     "A request's tokens do not depend on what else shares its steps (same seed, same tokens "
     "alone or under load): prefill sequences are multiplied one by one and decode rows with "
     "per-vector arithmetic. On CPUs with AVX-512 VNNI this costs nothing for q4_0, q8_0, "
     "q4_K, q5_K and q6_K weights: the int8 GEMM that larger batches of decode rows take gives "
     "each row the bits of its one-vector dot product. --no-batch-invariant lets a step's rows "
     "share one product also for the other types and CPUs, with results that may differ in "
     "the last bits with the batch.",
     &C::batch_invariant},
    {"expert-parallel",
     T::kEnum,
     S::kParallelism,
     "auto",
     "",
     "MODE",
     "How MoE models' routed experts are divided among the --tp ranks. on "
     "(also bare --expert-parallel): expert parallelism, each rank holds whole experts (dealt "
     "out as evenly as the count allows) and computes the tokens routed to them; off (also "
     "--no-expert-parallel): every expert's hidden dim is divided among the ranks; auto: "
     "expert parallelism where the experts' hidden dim cannot be divided evenly in whole quant "
     "blocks (Qwen3-235B-A22B at TP 8, say). Attention, dense FFNs and shared experts stay "
     "tensor-parallel; `tessera validate --tp N` names the choice.",
     &C::expert_parallel,
     {},
     "auto|on|off"},
    {"repack-weights",
     T::kEnum,
     S::kParallelism,
     "auto",
     "",
     "MODE",
     "CPU workers on AVX-512 VNNI: keep q4_K, q5_K, q6_K and q8_0 weights as decode panels (16 "
     "rows "
     "interleaved at their bit width, about their own size: faster decode) and the weights of "
     "the int8 GEMM (q4_0, q8_0, q4_K, q5_K, q6_K) as its int8 panels (about 2.2x the memory "
     "of q4_K weights, 1.2x of q8_0: batched steps read them instead of unpacking them every "
     "step), beside the mapped file; results are the same bits either way. auto: decode "
     "panels first, then int8 panels, while they fit in a quarter of the memory available "
     "when the worker loads; on: all; off: none (llama.cpp's --no-repack).",
     &C::repack_weights,
     {},
     "auto|on|off"},
    // --- scheduling and limits ---
    {"max-model-len", T::kInt, S::kScheduling, "0", "0: the model's context length", "N",
     "Longest sequence (prompt + generated tokens) served.", &C::max_model_len,
     Between(0, kIntMax)},
    {"kv-block-size", T::kInt, S::kScheduling, "16", "", "N", "Tokens per paged KV cache block.",
     &C::kv_block_size, Between(1, 4096)},
    {"kv-cache-tokens", T::kInt, S::kScheduling, "0",
     "0: GPU workers: what gpu-memory-utilization leaves after the weights (the smallest "
     "rank's); CPU workers: max-model-len, at least 4096, at most the context length",
     "N", "KV cache capacity in tokens (each worker holds its heads' share of every token).",
     &C::kv_cache_tokens, Between(0, 1e12)},
    {"gpu-memory-utilization", T::kDouble, S::kScheduling, "0.9", "", "F",
     "Fraction of each GPU's memory a GPU worker may use for weights, KV cache and buffers "
     "(with kv-cache-tokens 0 the KV cache gets what is left of it).",
     &C::gpu_memory_utilization, Above(0, 1)},
    {"max-num-seqs", T::kInt, S::kScheduling, "64", "", "N", "Most requests running in one batch.",
     &C::max_num_seqs, Between(1, 65536)},
    {"max-num-batched-tokens", T::kInt, S::kScheduling, "512", "", "N",
     "Most tokens in one step (prefill chunks plus decodes); longer prompts are prefilled in "
     "chunks.",
     &C::max_num_batched_tokens, Between(1, kIntMax)},
    {"max-waiting-requests", T::kInt, S::kScheduling, "256", "", "N",
     "Queued requests beyond which new ones are refused (HTTP 429 with Retry-After, gRPC "
     "RESOURCE_EXHAUSTED).",
     &C::max_waiting_requests, Between(0, kIntMax)},
    {"max-prompt-tokens", T::kInt, S::kScheduling, "0", "0: max-model-len", "N",
     "Longest prompt accepted (HTTP 400 / INVALID_ARGUMENT naming the limit beyond).",
     &C::max_prompt_tokens, Between(0, kIntMax)},
    {"max-prompt-bytes", T::kSize, S::kScheduling, "0",
     "0: 32 bytes per token of max-prompt-tokens", "SIZE",
     "Largest prompt text accepted, checked before the expensive work: a completion's prompt "
     "before tokenizing; a chat's message contents together before the template renders, and "
     "the rendered prompt as it grows (HTTP 400 / INVALID_ARGUMENT naming the limit).",
     &C::max_prompt_bytes, Between(0, 1ull << 40)},
    {"max-chat-messages", T::kInt, S::kScheduling, "0",
     "0: max-prompt-tokens (every message takes at least one token)", "N",
     "Most messages in one chat request, checked before the template renders.",
     &C::max_chat_messages, Between(0, kIntMax)},
    {"prep-threads", T::kInt, S::kScheduling, "0", "0: a quarter of the CPUs, 1 to 8", "N",
     "Threads that parse, render and tokenize requests whose body exceeds 16 KiB, at a lower "
     "CPU priority, so that the HTTP and gRPC threads always answer at once; such requests "
     "wait for one (at most max-waiting-requests of them, HTTP 429 beyond).",
     &C::prep_threads, Between(0, 1024)},
    {"parse-special-in-content", T::kBool, S::kScheduling, "false", "", "",
     "Let request text become control tokens, as before: special-token strings in chat "
     "message contents and completion prompts are tokenized as the special tokens they "
     "spell. By default only the chat template's own text yields special tokens (a user "
     "cannot forge a role header or end a turn), and a completion request opts in with "
     "\"parse_special_tokens\": true.",
     &C::parse_special_in_content},
    {"enable-prefix-caching", T::kBool, S::kScheduling, "true", "", "",
     "Automatic prefix caching: a prompt that begins with the tokens of an earlier request "
     "(a chat's earlier turns, a shared system prompt) reuses the KV cache blocks computed "
     "for them instead of prefilling them again. Whole blocks of kv-block-size tokens are "
     "shared, only between requests with the same cache_salt; blocks no request holds stay "
     "cached until the space is needed. Responses report the reused tokens as "
     "usage.prompt_tokens_details.cached_tokens; POST /reset_prefix_cache empties the cache. "
     "--no-enable-prefix-caching prefills every prompt in full.",
     &C::enable_prefix_caching},
    {"overlap-delivery", T::kBool, S::kScheduling, "true", "", "",
     "Produce the text of a step's tokens and hand them to the clients while the workers run "
     "the next step, instead of between steps (requests with stop strings are detokenized "
     "between steps either way: their text decides whether they go on). "
     "--no-overlap-delivery delivers between steps.",
     &C::overlap_delivery},
    {"speculative",
     T::kEnum,
     S::kScheduling,
     "none",
     "",
     "METHOD",
     "Speculative decoding. ngram: prompt lookup, as vLLM's ngram and llama.cpp's lookup "
     "decoding: each decode also feeds the tokens that followed the latest earlier occurrence "
     "of the sequence's last n-gram (prompt and output), and the workers keep those the model "
     "would have generated itself, so several tokens may come from one step. The output is "
     "the same as without (greedy and seeded sampling alike). mtp: the model's own "
     "multi-token-prediction block (GLM-5, DeepSeek-V3: nextn_predict_layers > 0) drafts "
     "greedily after each sampled token, fed back with its own hidden state for further "
     "drafts, and the next step verifies them the same way. none: one token per step.",
     &C::speculative,
     {},
     "none|ngram|mtp"},
    {"num-speculative-tokens", T::kInt, S::kScheduling, "4", "", "K",
     "Most tokens drafted per decode with --speculative.", &C::num_speculative_tokens,
     Between(1, 64)},
    {"ngram-min", T::kInt, S::kScheduling, "2", "", "N",
     "--speculative ngram: the shortest n-gram looked up.", &C::ngram_min, Between(1, 64)},
    {"ngram-max", T::kInt, S::kScheduling, "4", "", "N",
     "--speculative ngram: the longest n-gram looked up (longest matches first).", &C::ngram_max,
     Between(1, 64)},
    {"max-tokens-default", T::kInt, S::kScheduling, "0",
     "0: up to the context length (max-model-len minus the prompt), as vLLM does", "N",
     "Tokens generated when a request sets no max_tokens.", &C::max_tokens_default,
     Between(0, kIntMax)},
    {"max-body-size", T::kSize, S::kScheduling, "8MiB", "", "SIZE",
     "Largest request body accepted (HTTP 413 beyond; gRPC message size limit).", &C::max_body_size,
     Between(1024, 1ull << 32)},
    {"request-timeout", T::kDuration, S::kScheduling, "600s", "", "DURATION",
     "Longest a request may run, queueing included; 0 for no limit.", &C::request_timeout,
     Between(0, 30 * kDay)},
    {"drain-timeout", T::kDuration, S::kScheduling, "30s", "", "DURATION",
     "On SIGTERM: stop accepting, let in-flight requests finish for up to this long, then "
     "stop the workers and exit 0.",
     &C::drain_timeout, Between(0, kDay)},
    // --- workers and supervision ---
    {"rendezvous-timeout", T::kDuration, S::kSupervision, "60s", "", "DURATION",
     "How long to wait for every worker rank to join; the error names the missing ranks. "
     "Model loading is not counted.",
     &C::rendezvous_timeout, Above(0, kDay)},
    {"heartbeat-interval", T::kDuration, S::kSupervision, "500ms", "", "DURATION",
     "How often workers report that they are alive.", &C::heartbeat_interval, Above(0, 3600)},
    {"heartbeat-timeout", T::kDuration, S::kSupervision, "5s", "", "DURATION",
     "A worker silent this long is declared hung: its requests fail and the group restarts.",
     &C::heartbeat_timeout, Above(0, kDay)},
    {"max-worker-restarts", T::kInt, S::kSupervision, "5", "", "N",
     "Consecutive failed restarts after which the daemon stays up but not ready (/health "
     "and /metrics keep answering).",
     &C::max_worker_restarts, Between(0, 1e6)},
    {"restart-backoff", T::kDuration, S::kSupervision, "1s", "", "DURATION",
     "Delay before the first restart of the worker group; doubles after each failure.",
     &C::restart_backoff, Between(0, kDay)},
    {"restart-backoff-max", T::kDuration, S::kSupervision, "30s", "", "DURATION",
     "Cap of the doubling restart delay.", &C::restart_backoff_max, Between(0, kDay)},
    // --- logging ---
    {"log-format",
     T::kEnum,
     S::kLogging,
     "text",
     "",
     "FORMAT",
     "text for people, json (one object per line) for log collectors.",
     &C::log_format,
     {},
     "text|json"},
    {"log-level",
     T::kEnum,
     S::kLogging,
     "info",
     "",
     "LEVEL",
     "Least severe level logged.",
     &C::log_level,
     {},
     "debug|info|warning|error"},
};

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

template <typename V>
V& Ref(const OptionSpec& opt, DaemonConfig* config) {
  return config->*std::get<V DaemonConfig::*>(opt.field);
}
template <typename V>
const V& Ref(const OptionSpec& opt, const DaemonConfig& config) {
  return config.*std::get<V DaemonConfig::*>(opt.field);
}

absl::Status ParseList(const OptionSpec& opt, const std::string& text, DaemonConfig* config) {
  std::vector<std::string>& list = Ref<std::vector<std::string>>(opt, config);
  list.clear();
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    absl::Status s = AppendListItem(opt, std::string(item), config);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Span<const OptionSpec> DaemonOptions() { return kOptions; }

const OptionSpec* FindOption(const std::string& name) {
  for (const OptionSpec& o : kOptions) {
    if (name == o.name) return &o;
  }
  return nullptr;
}

const OptionSpec* NearestOption(const std::string& name) {
  const OptionSpec* best = nullptr;
  size_t best_d = SIZE_MAX;
  for (const OptionSpec& o : kOptions) {
    size_t d = EditDistance(absl::AsciiStrToLower(name), o.name);
    if (d < best_d) {
      best_d = d;
      best = &o;
    }
  }
  // A typo, a swapped pair, or "_" for "-" twice: at most a third of the name.
  if (best != nullptr && best_d <= std::max<size_t>(2, name.size() / 3)) return best;
  return nullptr;
}

const char* SectionTitle(Section s) {
  switch (s) {
    case Section::kModel:
      return "Model";
    case Section::kServer:
      return "Server";
    case Section::kParallelism:
      return "Parallelism and devices";
    case Section::kScheduling:
      return "Scheduling and limits";
    case Section::kSupervision:
      return "Workers and supervision";
    case Section::kLogging:
      return "Logging";
  }
  return "";
}

const char* TypeName(OptionType t) {
  switch (t) {
    case OptionType::kString:
      return "string";
    case OptionType::kEnum:
      return "choice";
    case OptionType::kInt:
      return "integer";
    case OptionType::kDouble:
      return "number";
    case OptionType::kBool:
      return "boolean";
    case OptionType::kSize:
      return "size";
    case OptionType::kDuration:
      return "duration";
    case OptionType::kList:
      return "list of strings";
  }
  return "";
}

absl::Status ApplyOptionText(const OptionSpec& opt, const std::string& text, DaemonConfig* config) {
  switch (opt.type) {
    case OptionType::kString:
      Ref<std::string>(opt, config) = text;
      return absl::OkStatus();
    case OptionType::kEnum: {
      for (absl::string_view c : absl::StrSplit(opt.choices, '|')) {
        if (c == text) {
          Ref<std::string>(opt, config) = text;
          return absl::OkStatus();
        }
      }
      return absl::InvalidArgumentError(
          absl::StrCat("expected one of ", opt.choices, ", got '", text, "'"));
    }
    case OptionType::kInt: {
      int64_t v = 0;
      if (!absl::SimpleAtoi(std::string(absl::StripAsciiWhitespace(text)), &v)) {
        return absl::InvalidArgumentError(absl::StrCat("expected an integer, got '", text, "'"));
      }
      Ref<int64_t>(opt, config) = v;
      return absl::OkStatus();
    }
    case OptionType::kDouble: {
      double v = 0;
      if (!absl::SimpleAtod(std::string(absl::StripAsciiWhitespace(text)), &v) ||
          !std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat("expected a number, got '", text, "'"));
      }
      Ref<double>(opt, config) = v;
      return absl::OkStatus();
    }
    case OptionType::kBool: {
      auto v = ParseBoolText(text);
      if (!v.ok()) return v.status();
      Ref<bool>(opt, config) = *v;
      return absl::OkStatus();
    }
    case OptionType::kSize: {
      auto v = ParseSize(text);
      if (!v.ok()) return v.status();
      Ref<uint64_t>(opt, config) = *v;
      return absl::OkStatus();
    }
    case OptionType::kDuration: {
      auto v = ParseDurationText(text);
      if (!v.ok()) return v.status();
      Ref<absl::Duration>(opt, config) = *v;
      return absl::OkStatus();
    }
    case OptionType::kList:
      return ParseList(opt, text, config);
  }
  return absl::InternalError("unknown option type");
}

absl::Status AppendListItem(const OptionSpec& opt, const std::string& text, DaemonConfig* config) {
  std::string item(absl::StripAsciiWhitespace(text));
  if (item.empty()) return absl::InvalidArgumentError("empty list item");
  if (item.find(',') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("list item '", item, "' contains a comma"));
  }
  Ref<std::vector<std::string>>(opt, config).push_back(std::move(item));
  return absl::OkStatus();
}

absl::Status CheckRange(const OptionSpec& opt, const DaemonConfig& config) {
  if (!opt.range.enabled) return absl::OkStatus();
  double v = 0;
  std::string shown;
  switch (opt.type) {
    case OptionType::kInt:
      v = static_cast<double>(Ref<int64_t>(opt, config));
      break;
    case OptionType::kDouble:
      v = Ref<double>(opt, config);
      break;
    case OptionType::kSize:
      v = static_cast<double>(Ref<uint64_t>(opt, config));
      break;
    case OptionType::kDuration:
      v = absl::ToDoubleSeconds(Ref<absl::Duration>(opt, config));
      break;
    default:
      return absl::OkStatus();
  }
  const Range& r = opt.range;
  bool ok = (r.min_open ? v > r.min : v >= r.min) && v <= r.max;
  if (ok) return absl::OkStatus();
  auto bound = [&](double b) {
    if (opt.type == OptionType::kSize) return FormatSize(static_cast<uint64_t>(b));
    if (opt.type == OptionType::kDuration) return FormatDurationText(absl::Seconds(b));
    return absl::StrCat(b);
  };
  return absl::OutOfRangeError(absl::StrCat(opt.name, " is ", FormatOptionValue(opt, config),
                                            " but must be in ", r.min_open ? "(" : "[",
                                            bound(r.min), ", ", bound(r.max), "]"));
}

std::string FormatOptionValue(const OptionSpec& opt, const DaemonConfig& config) {
  switch (opt.type) {
    case OptionType::kString:
    case OptionType::kEnum:
      return Ref<std::string>(opt, config);
    case OptionType::kInt:
      return absl::StrCat(Ref<int64_t>(opt, config));
    case OptionType::kDouble:
      return absl::StrCat(Ref<double>(opt, config));
    case OptionType::kBool:
      return Ref<bool>(opt, config) ? "true" : "false";
    case OptionType::kSize:
      return FormatSize(Ref<uint64_t>(opt, config));
    case OptionType::kDuration:
      return FormatDurationText(Ref<absl::Duration>(opt, config));
    case OptionType::kList:
      return absl::StrJoin(Ref<std::vector<std::string>>(opt, config), ",");
  }
  return "";
}

}  // namespace tessera::config
