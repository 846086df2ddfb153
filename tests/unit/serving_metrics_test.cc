// controller/metrics/serving_metrics.h (on prometheus-cpp): every metric the "Observability"
// issue names, with
// the type and labels it names; children dashboards need exist from the first scrape;
// histogram invariants; and `promtool check metrics` (Prometheus's own linter) accepts a
// fully populated exposition.
#include "controller/metrics/serving_metrics.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include "gtest/gtest.h"
#include "tests/unit/metrics_exposition_parser.h"

namespace tessera::metrics {
namespace {

using testing::Exposition;
using testing::ParseExposition;
using testing::ParsePromFloat;
using testing::Sample;

struct Expected {
  const char* name;
  const char* type;
  std::set<std::string> labels;  // besides model_name
};

// Transcribed from the issue's list (plus tessera_ready, which the alert rules use).
const Expected kExpected[] = {
    {"tessera_time_to_first_token_seconds", "histogram", {}},
    {"tessera_inter_token_latency_seconds", "histogram", {}},
    {"tessera_e2e_request_latency_seconds", "histogram", {}},
    {"tessera_request_queue_time_seconds", "histogram", {}},
    {"tessera_request_prefill_time_seconds", "histogram", {}},
    {"tessera_request_decode_time_seconds", "histogram", {}},
    {"tessera_request_prompt_tokens", "histogram", {}},
    {"tessera_request_generation_tokens", "histogram", {}},
    {"tessera_step_duration_seconds", "histogram", {"phase"}},
    {"tessera_allreduce_seconds", "histogram", {}},
    {"tessera_worker_compute_seconds", "histogram", {}},
    {"tessera_step_gap_seconds", "histogram", {}},
    {"tessera_step_handoff_seconds", "histogram", {"direction"}},
    {"tessera_step_control_seconds", "histogram", {}},
    {"tessera_prompt_tokens_total", "counter", {}},
    {"tessera_generation_tokens_total", "counter", {}},
    {"tessera_request_success_total", "counter", {"finished_reason"}},
    {"tessera_request_failure_total", "counter", {"reason"}},
    {"tessera_num_preemptions_total", "counter", {}},
    {"tessera_prefix_cache_queries_total", "counter", {}},
    {"tessera_prefix_cache_hits_total", "counter", {}},
    {"tessera_worker_restarts_total", "counter", {"rank"}},
    {"tessera_num_requests_running", "gauge", {}},
    {"tessera_num_requests_waiting", "gauge", {}},
    {"tessera_kv_cache_usage_perc", "gauge", {}},
    {"tessera_kv_cache_blocks", "gauge", {"state"}},
    {"tessera_worker_up", "gauge", {"rank"}},
    {"tessera_model_load_progress", "gauge", {"rank"}},
    {"tessera_model_load_seconds", "gauge", {}},
    {"tessera_build_info", "gauge", {"version", "git_sha", "backend"}},
    {"tessera_http_requests_total", "counter", {"route", "status"}},
    {"tessera_grpc_requests_total", "counter", {"method", "code"}},
    {"tessera_ready", "gauge", {}},
    {"tessera_spec_decode_num_drafts_total", "counter", {}},
    {"tessera_spec_decode_num_draft_tokens_total", "counter", {}},
    {"tessera_spec_decode_num_accepted_tokens_total", "counter", {}},
    {"tessera_spec_decode_num_accepted_tokens_per_pos_total", "counter", {"position"}},
};

// The family a sample belongs to: histogram samples drop _bucket/_sum/_count.
std::string FamilyOf(const Sample& s, const Exposition& e) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string n = s.name;
    const std::string sfx = suffix;
    if (n.size() > sfx.size() && n.compare(n.size() - sfx.size(), sfx.size(), sfx) == 0) {
      const std::string base = n.substr(0, n.size() - sfx.size());
      auto it = e.type.find(base);
      if (it != e.type.end() && it->second == "histogram") return base;
    }
  }
  return s.name;
}

bool HasSample(const Exposition& e, const std::string& name,
               const std::map<std::string, std::string>& labels) {
  for (const Sample& s : e.samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (match) return true;
  }
  return false;
}

TEST(ServingMetrics, EveryMetricOfTheIssueWithItsTypeAndLabelsFromTheFirstScrape) {
  Registry registry;
  ServingMetrics m(registry, "tiny", {.world_size = 2});
  const Exposition e = ParseExposition(registry.Expose());
  ASSERT_TRUE(e.errors.empty()) << e.errors.front();

  std::set<std::string> expected_names;
  for (const Expected& x : kExpected) {
    expected_names.insert(x.name);
    ASSERT_TRUE(e.type.count(x.name)) << x.name << " is not exposed";
    EXPECT_EQ(e.type.at(x.name), x.type) << x.name;
    EXPECT_FALSE(e.help.at(x.name).empty()) << x.name;
    int samples = 0;
    for (const Sample& s : e.samples) {
      if (FamilyOf(s, e) != x.name) continue;
      ++samples;
      std::set<std::string> labels;
      for (const auto& [k, v] : s.labels) {
        if (k != "le") labels.insert(k);
      }
      std::set<std::string> want = x.labels;
      want.insert("model_name");
      EXPECT_EQ(labels, want) << s.name;
      EXPECT_EQ(s.labels.at("model_name"), "tiny") << s.name;
    }
    EXPECT_GT(samples, 0) << x.name << " has no sample before any traffic";
  }
  for (const auto& [name, type] : e.type) {
    EXPECT_TRUE(expected_names.count(name)) << "unexpected family " << name;
  }
}

TEST(ServingMetrics, ChildrenDashboardsNeedExistFromTheStart) {
  Registry registry;
  ServingMetrics m(registry, "tiny", {.world_size = 2, .backend = "cuda"});
  const Exposition e = ParseExposition(registry.Expose());
  for (const char* reason : {"stop", "length", "abort"}) {
    EXPECT_TRUE(HasSample(e, "tessera_request_success_total", {{"finished_reason", reason}}))
        << reason;
  }
  EXPECT_TRUE(HasSample(e, "tessera_request_failure_total", {{"reason", "worker_error"}}));
  for (const char* state : {"used", "free"}) {
    EXPECT_TRUE(HasSample(e, "tessera_kv_cache_blocks", {{"state", state}})) << state;
  }
  for (const char* phase : {"prefill", "decode"}) {
    EXPECT_TRUE(HasSample(e, "tessera_step_duration_seconds_count", {{"phase", phase}})) << phase;
  }
  for (const char* rank : {"0", "1"}) {
    EXPECT_TRUE(HasSample(e, "tessera_worker_up", {{"rank", rank}})) << rank;
    EXPECT_TRUE(HasSample(e, "tessera_worker_restarts_total", {{"rank", rank}})) << rank;
    EXPECT_TRUE(HasSample(e, "tessera_model_load_progress", {{"rank", rank}})) << rank;
  }
  EXPECT_FALSE(HasSample(e, "tessera_worker_up", {{"rank", "2"}}));
  EXPECT_TRUE(HasSample(e, "tessera_http_requests_total",
                        {{"route", "/v1/completions"}, {"status", "200"}}));
  EXPECT_TRUE(HasSample(e, "tessera_grpc_requests_total",
                        {{"method", "/tessera.v1.Inference/Generate"}, {"code", "OK"}}));
  ASSERT_TRUE(HasSample(e, "tessera_build_info", {{"backend", "cuda"}}));
  for (const Sample& s : e.samples) {
    if (s.name == "tessera_build_info") {
      EXPECT_EQ(s.value, 1);
      EXPECT_FALSE(s.labels.at("version").empty());
      EXPECT_FALSE(s.labels.at("git_sha").empty());
    }
  }
}

TEST(ServingMetrics, TokenHistogramBucketsAreOneTwoFiveUpToTheContextLength) {
  Registry registry;
  ServingMetrics m(registry, "tiny", {.max_model_len = 4096});
  const Exposition e = ParseExposition(registry.Expose());
  std::vector<double> bounds;
  for (const Sample& s : e.samples) {
    if (s.name != "tessera_request_prompt_tokens_bucket") continue;
    const std::optional<double> le = ParsePromFloat(s.labels.at("le"));
    ASSERT_TRUE(le.has_value()) << s.labels.at("le");
    bounds.push_back(*le);
  }
  EXPECT_EQ(bounds,
            (std::vector<double>{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, HUGE_VAL}));
}

TEST(ServingMetrics, HandlesReachTheirSeries) {
  Registry registry;
  ServingMetrics m(registry, "tiny");
  m.generation_tokens_total.Increment(5);
  m.RequestSuccess("length").Increment();
  m.HttpRequest("/v1/completions", 429).Increment();
  m.kv_cache_usage.Set(0.5);
  const Exposition e = ParseExposition(registry.Expose());
  auto value = [&](const std::string& name, const std::map<std::string, std::string>& labels) {
    for (const Sample& s : e.samples) {
      bool match = s.name == name;
      for (const auto& [k, v] : labels) match = match && s.labels.count(k) && s.labels.at(k) == v;
      if (match) return s.value;
    }
    return -1.0;
  };
  EXPECT_EQ(value("tessera_generation_tokens_total", {}), 5);
  EXPECT_EQ(value("tessera_request_success_total", {{"finished_reason", "length"}}), 1);
  EXPECT_EQ(value("tessera_request_success_total", {{"finished_reason", "stop"}}), 0);
  EXPECT_EQ(value("tessera_http_requests_total", {{"status", "429"}}), 1);
  EXPECT_EQ(value("tessera_kv_cache_usage_perc", {}), 0.5);
}

TEST(ServingMetrics, TwoModelsShareOneRegistry) {
  Registry registry;
  ServingMetrics a(registry, "a");
  ServingMetrics b(registry, "b");
  a.preemptions.Increment();
  const Exposition e = ParseExposition(registry.Expose());
  EXPECT_TRUE(HasSample(e, "tessera_num_preemptions_total", {{"model_name", "a"}}));
  EXPECT_TRUE(HasSample(e, "tessera_num_preemptions_total", {{"model_name", "b"}}));
  EXPECT_EQ(a.preemptions.Value(), 1);
  EXPECT_EQ(b.preemptions.Value(), 0);
}

TEST(ServingMetrics, DisabledMetricsCostNothingAndExposeNothing) {
  Registry registry(/*enabled=*/false);
  ServingMetrics m(registry, "tiny");
  EXPECT_FALSE(m.enabled());
  m.ttft.Observe(0.1);
  m.generation_tokens_total.Increment();
  m.kv_cache_usage.Set(0.5);
  m.RequestSuccess("stop").Increment();
  EXPECT_EQ(m.generation_tokens_total.Value(), 0);
  EXPECT_EQ(m.kv_cache_usage.Value(), 0);
  EXPECT_EQ(m.ttft.Read().count, 0u);
  EXPECT_EQ(registry.Expose(), "");
}

// Observes every histogram and sets every gauge, as a daemon under load would.
void Populate(ServingMetrics& m) {
  for (const Histogram& h :
       {m.ttft, m.inter_token_latency, m.e2e_latency, m.queue_time, m.prefill_time, m.decode_time,
        m.allreduce, m.worker_compute, m.step_gap, m.handoff_to_workers, m.handoff_to_controller,
        m.step_control}) {
    for (double v : {1e-6, 0.003, 0.02, 0.7, 3.0, 1e5}) h.Observe(v);
  }
  for (double v : {1.0, 7.0, 300.0, 1e9}) {
    m.prompt_tokens_hist.Observe(v);
    m.generation_tokens_hist.Observe(v);
  }
  m.StepDuration("decode").Observe(0.004);
  m.StepDuration("mixed").Observe(0.03);
  m.prompt_tokens_total.Increment(1234);
  m.generation_tokens_total.Increment(99);
  m.RequestSuccess("stop").Increment();
  m.RequestFailure("worker_error").Increment();
  m.preemptions.Increment();
  m.WorkerRestarts(0).Increment();
  m.requests_running.Set(3);
  m.requests_waiting.Set(1);
  m.kv_cache_usage.Set(0.42);
  m.KvBlocks("used").Set(42);
  m.KvBlocks("free").Set(58);
  m.WorkerUp(0).Set(1);
  m.LoadProgress(0).Set(1);
  m.model_load_seconds.Set(2.5);
  m.ready.Set(1);
  m.HttpRequest("/v1/completions", 400).Increment();
  m.GrpcRequest("/tessera.v1.Inference/Chat", "CANCELLED").Increment();
}

TEST(ServingMetrics, HistogramInvariantsHoldInAPopulatedScrape) {
  Registry registry;
  ServingMetrics m(registry, "tiny");
  Populate(m);
  const Exposition e = ParseExposition(registry.Expose());
  ASSERT_TRUE(e.errors.empty());
  // Group bucket samples by family and label set (without le), in exposition order.
  struct Series {
    std::vector<std::pair<double, double>> buckets;  // (le, cumulative count)
    double count = -1, sum = std::nan("");
  };
  std::map<std::string, Series> series;
  int histograms = 0;
  for (const Sample& s : e.samples) {
    const std::string family = FamilyOf(s, e);
    if (family == s.name) continue;
    std::string key = family;
    for (const auto& [k, v] : s.labels) {
      if (k != "le") key += "," + k + "=" + v;
    }
    Series& x = series[key];
    if (s.name == family + "_bucket") {
      const std::optional<double> le = ParsePromFloat(s.labels.at("le"));
      ASSERT_TRUE(le.has_value()) << s.labels.at("le");
      x.buckets.emplace_back(*le, s.value);
    } else if (s.name == family + "_count") {
      x.count = s.value;
      ++histograms;
    } else {
      x.sum = s.value;
    }
  }
  // 12 unlabelled, steps of phases prefill, decode and mixed, hand-offs in both directions
  EXPECT_EQ(histograms, 17);
  for (const auto& [key, x] : series) {
    ASSERT_GE(x.buckets.size(), 2u) << key;
    for (size_t i = 1; i < x.buckets.size(); ++i) {
      EXPECT_LT(x.buckets[i - 1].first, x.buckets[i].first) << key;
      EXPECT_LE(x.buckets[i - 1].second, x.buckets[i].second) << key;
    }
    EXPECT_EQ(x.buckets.back().first, HUGE_VAL) << key;
    EXPECT_EQ(x.buckets.back().second, x.count) << key;
    EXPECT_FALSE(std::isnan(x.sum)) << key;
  }
}

std::string RunCommand(const std::string& command, int* exit_code) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *exit_code = -1;
    return output;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

TEST(ServingMetrics, PromtoolCheckMetricsAcceptsAPopulatedScrape) {
  int rc = 0;
  RunCommand("command -v promtool >/dev/null 2>&1", &rc);
  if (rc != 0) {
    GTEST_SKIP() << "promtool not found (Debian package prometheus; tools/install-deps.sh)";
  }
  Registry registry;
  ServingMetrics m(registry, "tiny \"quoted\" \\ model", {.world_size = 2});
  Populate(m);
  const std::string path =
      ::testing::TempDir() + "/serving_metrics_" + std::to_string(getpid()) + ".prom";
  std::ofstream(path) << registry.Expose();
  const std::string output = RunCommand("promtool check metrics < '" + path + "' 2>&1", &rc);
  std::remove(path.c_str());
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "");
}

}  // namespace
}  // namespace tessera::metrics
