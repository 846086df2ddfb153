// tessera bench: a load generator for an OpenAI-compatible server (tesserad, llama-server,
// vLLM): concurrent /v1/completions requests, then TTFT, inter-token and end-to-end latency
// percentiles and aggregate throughput.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "tools/bench_load.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

using json = nlohmann::json;

constexpr char kUsage[] =
    "usage: tessera bench --url URL [--concurrency C] [--requests R] [--prompt-len P]\n"
    "                     [--gen-len G] [--stream] [--model NAME] [--api-key KEY]\n"
    "                     [--logprobs] [--temperature T] [--seed S] [--timeout SECONDS]\n"
    "                     [--shared-prefix S | --turns T [--conversations N] [--turn-len U]]\n"
    "                     [--extra-body JSON] [--json]\n"
    "\n"
    "Sends R requests to URL's POST /v1/completions from C concurrent keep-alive clients\n"
    "(each sends its next request when the previous one is answered), every one with a\n"
    "prompt of about P tokens (common English words, different per request) and\n"
    "\"max_tokens\": G, \"ignore_eos\": true, so each generates exactly G tokens. Then prints\n"
    "requests ok / failed (by HTTP status), latency percentiles (p50/p90/p99/mean) and the\n"
    "aggregate throughput: generated tokens/s (the usage's completion_tokens summed over\n"
    "the wall time), prompt tokens/s and requests/s, and the prompt tokens the server\n"
    "reported as served from its prefix cache (usage.prompt_tokens_details.cached_tokens).\n"
    "\n"
    "Before the run one request with max_tokens 1 (a warm-up, not counted) measures how\n"
    "many tokens the server makes of the prompt, and the word count is scaled so that\n"
    "prompts are P tokens long.\n"
    "\n"
    "  --url URL          the server, e.g. http://127.0.0.1:8080 (a trailing /v1 is fine)\n"
    "  --concurrency C    concurrent clients (default 1)\n"
    "  --requests R       requests in all (default 4 x C, at least 8)\n"
    "  --prompt-len P     prompt tokens per request (default 128)\n"
    "  --gen-len G        generated tokens per request (default 64)\n"
    "  --stream           stream (SSE): measures time to first token (TTFT) and the\n"
    "                     inter-token latency (ITL: gaps between token events); without\n"
    "                     it only end-to-end latency (E2E)\n"
    "  --logprobs         ask for \"logprobs\": 0, so that the server streams an event for\n"
    "                     every token, also one whose text is empty (tesserad sends none\n"
    "                     for those; random-weight models emit many): use it for TTFT and\n"
    "                     ITL on such models\n"
    "  --model NAME       the \"model\" field (default: the first of GET /v1/models)\n"
    "  --api-key KEY      sent as Authorization: Bearer KEY (default $TESSERA_API_KEY)\n"
    "  --temperature T    sampling temperature (default 0: greedy)\n"
    "  --seed S           request i sends seed S+i and a prompt drawn with it (default 0; the\n"
    "                     warm-up uses S+R, so no request repeats it). Prompts repeated\n"
    "                     across runs let a server that caches prompts skip their prefill:\n"
    "                     give each run its own S to measure distinct requests\n"
    "  --timeout SECONDS  per-request limit (default 600)\n"
    "  --shared-prefix S  shared-prefix mode: every prompt starts with the same system\n"
    "                     prompt of about S tokens, then its own P tokens (agents resending\n"
    "                     one system prompt and tool list)\n"
    "  --turns T          multi-turn mode: N conversations of T requests each, sent in order\n"
    "                     by one client; the first prompt has P tokens, each later one is the\n"
    "                     previous prompt, its answer and U new tokens (a chat client\n"
    "                     resending the whole conversation). Latencies are also printed per\n"
    "                     turn\n"
    "  --conversations N  multi-turn mode: conversations (default C); R = N x T\n"
    "  --turn-len U       multi-turn mode: tokens each later turn adds (default P)\n"
    "  --extra-body JSON  fields merged into every request's body (they replace the\n"
    "                     generated ones of the same name), e.g. a structured-output\n"
    "                     constraint: '{\"response_format\": {\"type\": \"json_object\"}}'\n"
    "  --json             print the results as one JSON object\n"
    "\n"
    "Exit status: 0 when at least one request succeeded, 1 when none did or the server\n"
    "cannot be reached, 2 for usage errors.\n";

struct BenchFlags {
  std::string url;
  bench::LoadOptions load;
  int prompt_len = 128;
  int shared_prefix_len = 0;
  int conversations = 0;
  int turn_len = 0;
  bool json = false;
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
  size_t count = 0;
};

// Linear interpolation between closest ranks (numpy's default), so p50 <= p90 <= p99.
Percentiles Summarize(std::vector<double> values) {
  Percentiles p;
  p.count = values.size();
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  auto at = [&values](double q) {
    const double rank = q * static_cast<double>(values.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(lo + 1, values.size() - 1);
    return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  double sum = 0;
  for (double v : values) sum += v;
  p.mean = sum / static_cast<double>(values.size());
  return p;
}

// "401", "503", ...; "stream" for an error event inside a 200 stream; "connection" when
// no answer came.
std::string FailureKind(const bench::RequestResult& r) {
  if (r.status == 0) return "connection";
  if (r.status == 200) return "stream";
  return std::to_string(r.status);
}

struct Report {
  int ok = 0;
  std::map<std::string, int> failures;
  std::map<std::string, std::string> failure_messages;  // the first message of each kind
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  Percentiles ttft_ms, itl_ms, e2e_ms;
  // Multi-turn mode: TTFT and E2E of each turn's successful requests.
  std::vector<Percentiles> turn_ttft_ms, turn_e2e_ms;
  double wall_s = 0;
};

Report MakeReport(const bench::LoadResult& load, int turns) {
  Report report;
  report.wall_s = load.wall_s;
  std::vector<double> ttft, itl, e2e;
  std::vector<std::vector<double>> turn_ttft(turns > 1 ? turns : 0), turn_e2e(turn_ttft.size());
  for (const bench::RequestResult& r : load.requests) {
    if (!r.ok()) {
      const std::string kind = FailureKind(r);
      if (report.failures[kind]++ == 0) report.failure_messages[kind] = r.error;
      continue;
    }
    ++report.ok;
    report.prompt_tokens += r.prompt_tokens;
    report.completion_tokens += r.completion_tokens;
    report.cached_tokens += r.cached_tokens;
    e2e.push_back(r.e2e_s * 1e3);
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s * 1e3);
    if (r.turn < static_cast<int>(turn_e2e.size())) {
      turn_e2e[r.turn].push_back(r.e2e_s * 1e3);
      if (r.ttft_s >= 0) turn_ttft[r.turn].push_back(r.ttft_s * 1e3);
    }
    for (double gap : r.itl_s) itl.push_back(gap * 1e3);
  }
  report.ttft_ms = Summarize(std::move(ttft));
  report.itl_ms = Summarize(std::move(itl));
  report.e2e_ms = Summarize(std::move(e2e));
  for (size_t t = 0; t < turn_e2e.size(); ++t) {
    report.turn_ttft_ms.push_back(Summarize(std::move(turn_ttft[t])));
    report.turn_e2e_ms.push_back(Summarize(std::move(turn_e2e[t])));
  }
  return report;
}

double PerSecond(double amount, double wall_s) { return wall_s > 0 ? amount / wall_s : 0.0; }

json PercentilesJson(const Percentiles& p) {
  if (p.count == 0) return nullptr;
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}, {"count", p.count}};
}

void PrintJson(const BenchFlags& flags, const Report& r) {
  const bench::LoadOptions& o = flags.load;
  json out = {
      {"url", o.server.ToString()},
      {"model", o.model},
      {"concurrency", o.concurrency},
      {"requests", o.requests},
      {"prompt_len", flags.prompt_len},
      {"prompt_words", o.prompt_words},
      {"gen_len", o.gen_len},
      {"stream", o.stream},
      {"logprobs", o.logprobs},
      {"shared_prefix_len", flags.shared_prefix_len},
      {"shared_prefix_words", o.shared_prefix_words},
      {"turns", o.turns},
      {"turn_words", o.turn_words},
      {"extra_body", o.extra_body},
      {"ok", r.ok},
      {"failed", o.requests - r.ok},
      {"failures", r.failures},
      {"failure_messages", r.failure_messages},
      {"wall_s", r.wall_s},
      {"prompt_tokens", r.prompt_tokens},
      {"completion_tokens", r.completion_tokens},
      {"cached_tokens", r.cached_tokens},
      {"ttft_ms", PercentilesJson(r.ttft_ms)},
      {"itl_ms", PercentilesJson(r.itl_ms)},
      {"e2e_ms", PercentilesJson(r.e2e_ms)},
      {"generated_tokens_per_s", PerSecond(static_cast<double>(r.completion_tokens), r.wall_s)},
      {"prompt_tokens_per_s", PerSecond(static_cast<double>(r.prompt_tokens), r.wall_s)},
      {"requests_per_s", PerSecond(r.ok, r.wall_s)}};
  if (!r.turn_e2e_ms.empty()) {
    json by_turn = json::array();
    for (size_t t = 0; t < r.turn_e2e_ms.size(); ++t) {
      by_turn.push_back({{"turn", t + 1},
                         {"ttft_ms", PercentilesJson(r.turn_ttft_ms[t])},
                         {"e2e_ms", PercentilesJson(r.turn_e2e_ms[t])}});
    }
    out["by_turn"] = by_turn;
  }
  std::printf("%s\n", out.dump(2).c_str());
}

std::string Row(const char* name, const Percentiles& p) {
  if (p.count == 0) return absl::StrFormat("%-12s %10s\n", name, "-");
  return absl::StrFormat("%-12s %10.1f %10.1f %10.1f %10.1f\n", name, p.p50, p.p90, p.p99, p.mean);
}

void PrintTable(const BenchFlags& flags, const Report& r) {
  const bench::LoadOptions& o = flags.load;
  std::string out = absl::StrFormat(
      "tessera bench: %s, model %s\n"
      "  %d requests, concurrency %d, prompt %d tokens, gen %d tokens, %s%s\n\n",
      o.server.ToString(), o.model, o.requests, o.concurrency, flags.prompt_len, o.gen_len,
      o.stream ? "streaming" : "not streaming", o.logprobs ? ", logprobs" : "");
  if (o.shared_prefix_words > 0) {
    absl::StrAppendFormat(&out,
                          "  shared-prefix mode: a common system prompt of %d tokens first\n\n",
                          flags.shared_prefix_len);
  }
  if (o.turns > 1) {
    absl::StrAppendFormat(&out,
                          "  multi-turn mode: %d conversations of %d turns, each later turn "
                          "adding its answer and %d prompt tokens\n\n",
                          (o.requests + o.turns - 1) / o.turns, o.turns,
                          flags.turn_len > 0 ? flags.turn_len : flags.prompt_len);
  }
  absl::StrAppendFormat(&out, "requests     ok %d, failed %d\n", r.ok, o.requests - r.ok);
  for (const auto& [kind, count] : r.failures) {
    absl::StrAppendFormat(&out, "  failed %-10s %5d  %s\n", kind, count,
                          r.failure_messages.at(kind));
  }
  absl::StrAppendFormat(&out, "\n%-12s %10s %10s %10s %10s\n", "latency (ms)", "p50", "p90", "p99",
                        "mean");
  if (o.stream) {
    out += Row("TTFT", r.ttft_ms);
    out += Row("ITL", r.itl_ms);
  }
  out += Row("E2E", r.e2e_ms);
  for (size_t t = 0; t < r.turn_e2e_ms.size(); ++t) {
    const std::string turn = absl::StrCat("turn ", t + 1);
    if (o.stream) out += Row(absl::StrCat(turn, " TTFT").c_str(), r.turn_ttft_ms[t]);
    out += Row(absl::StrCat(turn, " E2E").c_str(), r.turn_e2e_ms[t]);
  }
  absl::StrAppendFormat(&out,
                        "\nthroughput   generated %.1f tok/s, prompt %.1f tok/s, %.2f requests/s\n"
                        "totals       %d completion tokens, %d prompt tokens in %.2f s\n",
                        PerSecond(static_cast<double>(r.completion_tokens), r.wall_s),
                        PerSecond(static_cast<double>(r.prompt_tokens), r.wall_s),
                        PerSecond(r.ok, r.wall_s), r.completion_tokens, r.prompt_tokens, r.wall_s);
  absl::StrAppendFormat(&out, "prefix cache %d of the prompt tokens cached (%.1f%%)\n",
                        r.cached_tokens,
                        r.prompt_tokens > 0 ? 100.0 * r.cached_tokens / r.prompt_tokens : 0.0);
  std::fputs(out.c_str(), stdout);
}

// Parses the flags; returns 0 to go on, else the exit code (usage printed or refused).
int ParseFlags(const Args& args, BenchFlags* flags) {
  bench::LoadOptions& o = flags->load;
  int requests = 0;
  if (const char* key = std::getenv("TESSERA_API_KEY")) o.api_key = key;
  auto usage_error = [](const std::string& message) {
    std::fprintf(stderr, "tessera bench: %s\n\n%s", message.c_str(), kUsage);
    return 2;
  };
  auto int_flag = [&](const std::string& name, const std::string& value, int min, int* out) {
    if (!absl::SimpleAtoi(value, out) || *out < min) {
      return usage_error(absl::StrCat(name, " '", value, "': expected an integer >= ", min));
    }
    return 0;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    int rc = 0;
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return -1;
    } else if (a == "--stream") {
      o.stream = true;
    } else if (a == "--logprobs") {
      o.logprobs = true;
    } else if (a == "--json") {
      flags->json = true;
    } else if (!has_value) {
      return usage_error(absl::StrCat("unexpected argument '", a, "' (or a missing value)"));
    } else if (a == "--url") {
      flags->url = args[++i];
    } else if (a == "--concurrency") {
      rc = int_flag(a, args[++i], 1, &o.concurrency);
    } else if (a == "--requests") {
      rc = int_flag(a, args[++i], 1, &requests);
    } else if (a == "--prompt-len") {
      rc = int_flag(a, args[++i], 1, &flags->prompt_len);
    } else if (a == "--gen-len") {
      rc = int_flag(a, args[++i], 1, &o.gen_len);
    } else if (a == "--shared-prefix") {
      rc = int_flag(a, args[++i], 1, &flags->shared_prefix_len);
    } else if (a == "--turns") {
      rc = int_flag(a, args[++i], 1, &o.turns);
    } else if (a == "--conversations") {
      rc = int_flag(a, args[++i], 1, &flags->conversations);
    } else if (a == "--turn-len") {
      rc = int_flag(a, args[++i], 1, &flags->turn_len);
    } else if (a == "--model") {
      o.model = args[++i];
    } else if (a == "--api-key") {
      o.api_key = args[++i];
    } else if (a == "--temperature") {
      if (!absl::SimpleAtod(args[++i], &o.temperature) || o.temperature < 0) {
        return usage_error(absl::StrCat("--temperature '", args[i], "': expected a number >= 0"));
      }
    } else if (a == "--seed") {
      if (!absl::SimpleAtoi(args[++i], &o.seed)) {
        return usage_error(absl::StrCat("--seed '", args[i], "': expected an unsigned integer"));
      }
    } else if (a == "--extra-body") {
      o.extra_body = json::parse(args[++i], nullptr, false);
      if (o.extra_body.is_discarded() || !o.extra_body.is_object()) {
        return usage_error("--extra-body: expected a JSON object");
      }
    } else if (a == "--timeout") {
      if (!absl::SimpleAtod(args[++i], &o.timeout_s) || !(o.timeout_s > 0)) {
        return usage_error(absl::StrCat("--timeout '", args[i], "': expected seconds > 0"));
      }
    } else {
      return usage_error(absl::StrCat("unexpected argument '", a, "'"));
    }
    if (rc != 0) return rc;
  }
  if (flags->url.empty()) return usage_error("--url URL is required");
  auto server = bench::ParseServerUrl(flags->url);
  if (!server.ok()) return usage_error(std::string(server.status().message()));
  o.server = *server;
  if (o.turns > 1 && flags->shared_prefix_len > 0) {
    return usage_error("--turns and --shared-prefix are separate modes; give one");
  }
  if ((flags->conversations > 0 || flags->turn_len > 0) && o.turns <= 1) {
    return usage_error("--conversations and --turn-len need --turns T (T > 1)");
  }
  if (o.turns > 1) {
    if (requests > 0) return usage_error("multi-turn mode counts --conversations, not --requests");
    o.requests =
        std::max(flags->conversations, flags->conversations > 0 ? 1 : o.concurrency) * o.turns;
  } else {
    o.requests = requests > 0 ? requests : std::max(8, 4 * o.concurrency);
  }
  o.prompt_words = flags->prompt_len;
  o.shared_prefix_words = flags->shared_prefix_len;
  o.turn_words = flags->turn_len;
  return 0;
}

// The model to name in requests: the first of GET /v1/models. Empty (and a message on
// stderr) when the server cannot tell.
std::string DiscoverModel(const bench::LoadOptions& o) {
  const bench::GetResult models = bench::HttpGet(o.server, "/v1/models", o.api_key, 30.0);
  if (!models.error.empty()) {
    std::fprintf(stderr, "tessera bench: %s\n", models.error.c_str());
    return "";
  }
  if (models.status != 200) {
    std::fprintf(stderr, "tessera bench: GET %s/v1/models: HTTP %d: %s\n",
                 o.server.ToString().c_str(), models.status,
                 bench::ErrorMessageOf(models.body).c_str());
    return "";
  }
  const json list = json::parse(models.body, nullptr, /*allow_exceptions=*/false);
  if (list.is_object() && list.contains("data") && list["data"].is_array() &&
      !list["data"].empty() && list["data"][0].contains("id") &&
      list["data"][0]["id"].is_string()) {
    return list["data"][0]["id"].get<std::string>();
  }
  std::fprintf(stderr, "tessera bench: GET %s/v1/models: expected {\"data\": [{\"id\": ...}]}\n",
               o.server.ToString().c_str());
  return "";
}

// Warms the server up with max_tokens 1 requests and scales the prompt's word count until
// the server counts `prompt_len` prompt tokens (three tries; tokenizers differ; prompts over
// 256 tokens, the shared prefix and the turns scaled from a 256-token probe). False (and a
// message) when the request fails: the run would fail the same way.
bool CalibratePrompt(int prompt_len, bench::LoadOptions* o) {
  bench::LoadOptions probe = *o;
  probe.gen_len = 1;
  probe.stream = false;
  // The shared prefix stays out of the warm-up, so that a prefix cache gains nothing from it.
  probe.shared_prefix_words = 0;
  // Long prompts are measured on a shorter probe (a first guess of one word per token could
  // exceed the server's prompt limit), then scaled.
  const int probe_len = std::min(prompt_len, 256);
  probe.prompt_words = probe_len;
  double words_per_token = 1.0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    // A prompt no request of the run sends (index `requests`: seed S + R), so that a server
    // that caches prompts gains nothing from the warm-up.
    const bench::RequestResult r = bench::SendOne(probe, o->requests);
    if (!r.ok()) {
      std::fprintf(stderr, "tessera bench: warm-up request: %s\n", r.error.c_str());
      return false;
    }
    if (r.prompt_tokens <= 0) break;
    words_per_token =
        static_cast<double>(probe.prompt_words) / static_cast<double>(r.prompt_tokens);
    if (r.prompt_tokens == probe_len) break;
    const int next = std::max(1, static_cast<int>(std::lround(probe_len * words_per_token)));
    if (next == probe.prompt_words) break;
    probe.prompt_words = next;
  }
  auto words = [&](int tokens) {
    return std::max(1, static_cast<int>(std::lround(tokens * words_per_token)));
  };
  o->prompt_words = probe_len == prompt_len ? probe.prompt_words : words(prompt_len);
  if (o->shared_prefix_words > 0) o->shared_prefix_words = words(o->shared_prefix_words);
  if (o->turn_words > 0) o->turn_words = words(o->turn_words);
  return true;
}

}  // namespace

int RunBench(const Args& args) {
  BenchFlags flags;
  if (int rc = ParseFlags(args, &flags); rc != 0) return rc < 0 ? 0 : rc;
  bench::LoadOptions& o = flags.load;
  if (o.model.empty()) {
    o.model = DiscoverModel(o);
    if (o.model.empty()) return 1;
  }
  if (!CalibratePrompt(flags.prompt_len, &o)) return 1;
  const bench::LoadResult load = bench::RunLoad(o);
  const Report report = MakeReport(load, o.turns);
  if (flags.json) {
    PrintJson(flags, report);
  } else {
    PrintTable(flags, report);
  }
  std::fflush(stdout);
  if (report.ok == 0) {
    std::fprintf(
        stderr, "tessera bench: every request failed (first: %s)\n",
        report.failure_messages.empty() ? "?" : report.failure_messages.begin()->second.c_str());
    return 1;
  }
  return 0;
}

}  // namespace tessera::cli
