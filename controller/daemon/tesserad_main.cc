// tesserad: the Tessera daemon. Reads its configuration, opens the model's metadata,
// starts the worker group (one tessera-worker per rank), and serves the OpenAI-compatible
// REST gateway (with /health, /ready, /metrics) and the gRPC API until SIGTERM, which
// drains: new requests are refused, running ones finish (up to --drain-timeout), then the
// workers stop and the process exits 0.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/chat/tool_calls.h"
#include "common/gguf/split.h"
#include "common/model/arch.h"
#include "common/model/hparams.h"
#include "common/model/shard_plan.h"
#include "common/model/synthetic.h"
#include "common/model/tensor_map.h"
#include "controller/config/daemon_config.h"
#include "controller/daemon/log.h"
#include "controller/daemon/memory_trimmer.h"
#include "controller/daemon/metrics_bridge.h"
#include "controller/grpc/grpc_server.h"
#include "controller/http/gateway.h"
#include "controller/metrics/registry.h"
#include "controller/metrics/serving_metrics.h"
#include "controller/serving/model_text.h"
#include "controller/serving/serving_engine.h"
#include "controller/workers/gpu_plan.h"
#include "controller/workers/worker_group.h"
#include "nlohmann/json.hpp"
#ifdef TESSERA_HAVE_CUDA
#include "kernels/cuda/device.h"
#endif

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "0.0.0"
#endif

namespace tessera::daemon {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Ms(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

// The embedded default model: a tiny random-weight llama the project generates itself,
// written once into the cache directory.
absl::StatusOr<std::string> DefaultModel(const std::string& cache_dir) {
  std::filesystem::path dir(cache_dir);
  std::filesystem::path path = dir / "tessera-default.gguf";
  if (std::filesystem::exists(path)) return path.string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create the cache directory ", cache_dir,
                                                    ": ", ec.message(),
                                                    " (set --cache-dir or --model)"));
  }
  model::SyntheticOptions o;
  o.arch = "llama";
  o.preset = "tiny";
  auto w = model::BuildSyntheticModel(o);
  if (!w.ok()) return w.status();
  const std::string tmp = path.string() + ".tmp" + std::to_string(getpid());
  if (absl::Status s = w->WriteFile(tmp); !s.ok()) return s;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot write ", path.string(), ": ", ec.message()));
  LogInfo("generated the embedded default model", {{"path", path.string()}});
  return path.string();
}

struct ModelFacts {
  serving::ModelInfo info;
  int64_t n_ctx = 0;
  int64_t n_nextn = 0;                      // NextN/MTP blocks the file has
  std::vector<std::string> split_strategy;  // ShardPlan::strategy (tp > 1)
};

// Reads the model's metadata only (no weights) and checks that it can be served split
// `tp` ways: the errors `tessera validate` would report, in one message.
absl::StatusOr<ModelFacts> InspectModel(const config::DaemonConfig& c, const std::string& path,
                                        const gguf::GgufModel& file, int tp) {
  const gguf::Metadata& md = file.metadata();
  std::string arch_name = md.GetString("general.architecture").value_or("");
  const model::ArchSpec* arch = model::FindArch(arch_name);
  if (arch == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unknown architecture '", arch_name,
                     "'; supported: ", absl::StrJoin(model::SupportedArchNames(), ", ")));
  }
  std::vector<model::KeyProblem> problems;
  model::HyperParams hp = model::LoadHyperParams(*arch, arch_name, md, nullptr, &problems);
  for (const model::KeyProblem& p : problems) {
    if (p.error) return absl::InvalidArgumentError(absl::StrCat(path, ": ", p.message));
  }
  model::TensorMap map = model::MapTensors(*arch, hp, file);
  if (!map.problems.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", absl::StrJoin(map.problems, "; ")));
  }
  model::PlanOptions plan_options;
  plan_options.experts =
      model::ParseExpertParallel(c.expert_parallel).value_or(model::ExpertParallel::kAuto);
  model::ShardPlan plan = model::BuildShardPlan(map, hp, tp, plan_options);
  if (!plan.problems.empty()) {
    std::vector<int> valid = model::ValidTpSizes(map, hp, 64, plan_options);
    return absl::InvalidArgumentError(absl::StrCat(
        path, " cannot be split ", tp, " ways: ", model::SummarizeProblems(plan.problems),
        " (valid --tp values: ", absl::StrJoin(valid, ", "), ")"));
  }
  ModelFacts f;
  serving::ModelInfo& i = f.info;
  i.name = c.model_name;
  if (i.name.empty()) i.name = md.GetString("general.name").value_or("");
  if (i.name.empty()) i.name = std::filesystem::path(path).stem().string();
  i.architecture = arch_name;
  i.path = path;
  i.context_length = hp.n_ctx_train;
  i.max_model_len = c.max_model_len > 0 ? c.max_model_len : hp.n_ctx_train;
  i.n_vocab = static_cast<int32_t>(hp.n_vocab);
  i.tp = tp;
  i.created_unix = static_cast<int64_t>(std::time(nullptr));
  f.n_ctx = hp.n_ctx_train;
  f.n_nextn = hp.n_nextn;
  f.split_strategy = plan.strategy;
  if (c.speculative == "mtp") {
    if (const std::string why = model::MtpUnavailable(*arch, hp, arch_name); !why.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": --speculative mtp needs the model's multi-token-prediction block (",
                       arch_name, ".nextn_predict_layers > 0, as GLM-5 files have): ", why,
                       " (--speculative ngram drafts without one)"));
    }
  }
  return f;
}

// Where the ranks run (see workers::PlaceRanks): GPU workers in a CUDA build that sees
// GPUs, unless --cpu-workers; otherwise CPU workers as before. Logs the choice and its
// warnings; errors name the --gpus / --tp problem.
absl::StatusOr<workers::Placement> PlaceWorkers(const config::DaemonConfig& c, int tp) {
  workers::PlacementInputs in;
  in.tp = tp;
  in.cpu_workers = c.cpu_workers > 0;
  in.gpus = c.gpus;
  in.external_workers = c.external_workers;
#ifdef TESSERA_HAVE_CUDA
  in.build_has_cuda = true;
  std::vector<cuda::DeviceInfo> devices;
  if (!in.cpu_workers && !in.external_workers) devices = cuda::ListDevices();
  in.n_visible = static_cast<int>(devices.size());
#endif
#ifdef TESSERA_HAVE_NCCL
  in.build_has_nccl = true;
#endif
  auto p = workers::PlaceRanks(in);
  if (!p.ok()) {
    const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
    return absl::Status(p.status().code(),
                        absl::StrCat(p.status().message(),
                                     env != nullptr ? absl::StrCat(" (CUDA_VISIBLE_DEVICES=", env,
                                                                   "; ids count from its first)")
                                                    : ""));
  }
  for (const std::string& w : p->warnings) LogWarning(w);
  if (!p->gpus.empty()) {
    std::vector<std::string> names;
    for (int g : p->gpus) {
      std::string name = absl::StrCat("cuda:", g);
#ifdef TESSERA_HAVE_CUDA
      if (g < static_cast<int>(devices.size())) absl::StrAppend(&name, " (", devices[g].name, ")");
#endif
      names.push_back(name);
    }
    LogInfo(absl::StrCat("GPU workers: ", absl::StrJoin(names, ", ")),
            {{"comm", p->comm_backend},
             {"gpu_memory_utilization", absl::StrCat(c.gpu_memory_utilization)}});
  }
  return p;
}

int Serve(const config::DaemonConfig& c) {
  SetLogLevel(c.log_level);
  SetLogFormat(c.log_format);

  std::string model_path = c.model;
  if (model_path.empty()) {
    auto p = DefaultModel(c.cache_dir);
    if (!p.ok()) {
      LogError(std::string(p.status().message()));
      return 1;
    }
    model_path = *p;
  }
  const int tp = static_cast<int>(c.cpu_workers > 0 ? c.cpu_workers : c.tp);
  // The header, metadata and tensor index only (no weight pages), read once.
  auto file = gguf::GgufModel::Open(model_path);
  if (!file.ok()) {
    LogError(std::string(file.status().message()));
    return 1;
  }
  auto facts = InspectModel(c, model_path, *file, tp);
  if (!facts.ok()) {
    LogError(std::string(facts.status().message()));
    return 1;
  }
  for (const std::string& line : facts->split_strategy) {
    LogInfo(absl::StrCat("tensor split: ", line));
  }
  auto text = serving::LoadModelText(file->metadata(), c.chat_template);
  if (!text.ok()) {
    LogError(absl::StrCat("the model's tokenizer or chat template cannot be loaded: ",
                          text.status().message()));
    return 1;
  }
  if (!text->chat_template) {
    // A template the model carries but the engine cannot parse is an error, as a bad
    // override is; a model without one serves completions only.
    if (file->metadata().Has("tokenizer.chat_template")) {
      LogError(text->chat_template_problem);
      return 1;
    }
    LogWarning("the model has no chat template: /v1/chat/completions and Chat will fail",
               {{"hint", "--chat-template NAME|FILE"}});
  }
  facts->info.eog_token_ids = text->eog_token_ids;
  if (c.check) {
    std::printf("%s: OK — %s (%s), context %lld, tp %d, config valid\n", model_path.c_str(),
                facts->info.name.c_str(), facts->info.architecture.c_str(),
                static_cast<long long>(facts->n_ctx), tp);
    return 0;
  }

  auto placement = PlaceWorkers(c, tp);
  if (!placement.ok()) {
    LogError(std::string(placement.status().message()));
    return 1;
  }
  const bool on_gpus = !placement->gpus.empty();

  metrics::Registry registry(!c.disable_metrics);
  metrics::ServingMetricsOptions mo;
  mo.world_size = tp;
  mo.max_model_len = facts->info.max_model_len;
  mo.backend = on_gpus ? "cuda" : "cpu";
  metrics::ServingMetrics m(registry, facts->info.name, mo);
  MetricsBridge bridge(m);

  workers::WorkerGroupOptions wo;
  wo.model_path = model_path;
  wo.world_size = tp;
  wo.external_workers = c.external_workers;
  wo.worker_binary = c.worker_binary;
  wo.control_host = c.control_host;
  wo.control_port = static_cast<int>(c.control_port);
  wo.threads_per_worker = static_cast<int>(c.threads_per_worker);
  wo.dtype = c.dtype;
  wo.exact = c.exact;
  wo.batch_invariant = c.batch_invariant;
  wo.load_mtp = c.speculative == "mtp";
  wo.weight_packing = c.repack_weights;
  wo.expert_parallel = c.expert_parallel;
  wo.kv_block_size = static_cast<int>(c.kv_block_size);
  wo.gpus = placement->gpus;
  wo.comm_backend = placement->comm_backend;
  if (c.cpu_collectives == "gloo") wo.collective_slot_bytes = 0;
  wo.gpu_memory_utilization = c.gpu_memory_utilization;
  // GPU workers with no --kv-cache-tokens plan their cache from free device memory and
  // report their block counts; the group serves the smallest.
  wo.kv_tokens = c.kv_cache_tokens > 0 ? c.kv_cache_tokens
                 : on_gpus             ? 0
                           : std::min<int64_t>(std::max<int64_t>(facts->info.max_model_len, 4096),
                                               std::max<int64_t>(facts->n_ctx, 1));
  wo.heartbeat_interval = Ms(c.heartbeat_interval);
  wo.heartbeat_timeout = Ms(c.heartbeat_timeout);
  wo.rendezvous_timeout = Ms(c.rendezvous_timeout);
  wo.max_restarts = static_cast<int>(c.max_worker_restarts);
  wo.restart_backoff = Ms(c.restart_backoff);
  wo.restart_backoff_max = Ms(c.restart_backoff_max);
  wo.log = [](const std::string& line) { LogInfo(line); };
  auto group = workers::WorkerGroup::Create(wo);
  if (!group.ok()) {
    LogError(std::string(group.status().message()));
    return 1;
  }
  workers::WorkerGroupEvents ev;
  ev.on_restart = [&m](int rank) { m.WorkerRestarts(rank).Increment(); };
  ev.on_step = [&m](const workers::StepTiming& t) {
    m.worker_compute.Observe(t.compute_seconds);
    m.step_control.Observe(t.control_seconds);
    for (double seconds : t.allreduce_seconds) m.allreduce.Observe(seconds);
    if (t.to_workers_seconds >= 0) m.handoff_to_workers.Observe(t.to_workers_seconds);
    if (t.to_controller_seconds >= 0) m.handoff_to_controller.Observe(t.to_controller_seconds);
  };
  ev.on_ready = [&m, name = facts->info.name](double load_seconds) {
    m.model_load_seconds.Set(load_seconds);
    LogInfo("ready", {{"model", name}, {"load_s", absl::StrFormat("%.2f", load_seconds)}});
  };
  (*group)->set_events(ev);

  serving::EngineOptions eo;
  eo.max_num_seqs = static_cast<int>(c.max_num_seqs);
  eo.max_num_batched_tokens = static_cast<int>(c.max_num_batched_tokens);
  eo.max_waiting_requests = static_cast<int>(c.max_waiting_requests);
  eo.max_prompt_tokens = c.max_prompt_tokens;
  eo.max_model_len = facts->info.max_model_len;
  eo.request_timeout = Ms(c.request_timeout);
  eo.default_max_tokens = static_cast<int32_t>(c.max_tokens_default);
  eo.max_prompt_bytes = c.max_prompt_bytes;
  eo.max_chat_messages = c.max_chat_messages;
  eo.parse_special_in_content = c.parse_special_in_content;
  eo.enable_prefix_caching = c.enable_prefix_caching;
  eo.overlap_delivery = c.overlap_delivery;
  eo.speculative = c.speculative;
  eo.num_speculative_tokens = static_cast<int>(c.num_speculative_tokens);
  eo.ngram_min = static_cast<int>(c.ngram_min);
  eo.ngram_max = static_cast<int>(c.ngram_max);
  auto engine = std::make_unique<serving::ServingEngine>(group->get(), std::move(text->tokenizer),
                                                         std::move(text->chat_template),
                                                         facts->info, eo, &bridge);

  workers::WorkerGroup* g = group->get();
  // Gauges read from the engine and the workers when Prometheus scrapes (the HTTP server,
  // the only caller of Expose, stops before the engine and the group go away).
  serving::ServingEngine* e = engine.get();
  registry.OnScrape([&m, e, g] {
    const serving::EngineStats s = e->stats();
    m.requests_running.Set(s.running);
    m.requests_waiting.Set(s.waiting);
    m.kv_cache_usage.Set(s.kv_usage);
    m.KvBlocks("used").Set(s.kv_blocks_used);
    m.KvBlocks("free").Set(s.kv_blocks_free);
    const bool ready = g->ready();
    for (const workers::RankState& r : g->ranks()) {
      m.WorkerUp(r.rank).Set(ready && r.loaded ? 1 : 0);
      m.LoadProgress(r.rank).Set(r.bytes_total ? double(r.bytes_done) / r.bytes_total : 0.0);
    }
    m.ready.Set(e->ready() ? 1 : 0);
  });

  // Large requests are parsed, rendered and tokenized here, off the I/O threads.
  serving::PrepPool prep_pool(
      c.prep_threads > 0 ? static_cast<int>(c.prep_threads) : serving::PrepPool::DefaultThreads(),
      static_cast<int>(c.max_waiting_requests));

  http::GatewayOptions go;
  go.api_key = c.api_key;
  go.prep_pool = &prep_pool;
  go.loopback_only = http::IsLoopbackHost(c.host);
  go.allowed_origins = c.allowed_origins;
  serving::ChatOutputSettings chat_output;
  chat_output.tool_call_format = c.tool_call_parser == "auto"
                                     ? chat::DetectToolCallFormat(text->chat_template_source)
                                     : c.tool_call_parser;
  chat_output.parse_reasoning = c.reasoning_parser != "none";
  LogInfo("chat output parsing",
          {{"tool_call_parser", chat_output.tool_call_format},
           {"reasoning_parser", chat_output.parse_reasoning ? "think" : "none"}});
  go.chat_output = chat_output;
  go.metrics_text = [&registry] { return registry.Expose(); };
  go.ready_details = [g] {
    nlohmann::json j;
    j["workers"] = g->state();
    nlohmann::json ranks = nlohmann::json::array();
    for (const workers::RankState& r : g->ranks()) {
      ranks.push_back({{"rank", r.rank},
                       {"connected", r.connected},
                       {"loaded", r.loaded},
                       {"host", r.hostname},
                       {"bytes_done", r.bytes_done},
                       {"bytes_total", r.bytes_total}});
      if (!r.info.device().empty()) ranks.back()["device"] = r.info.device();
    }
    j["ranks"] = ranks;
    return j;
  };
  go.route_observer = [&m](const std::string& route, int status) {
    m.HttpRequest(route, status).Increment();
  };
  auto gateway = std::make_shared<http::Gateway>(engine.get(), go);
  http::ServerOptions so;
  so.host = c.host;
  so.port = static_cast<uint16_t>(c.http_port);
  so.max_body_bytes = c.max_body_size;
  auto http_server = http::StartGatewayServer(so, gateway);
  if (!http_server.ok()) {
    LogError(std::string(http_server.status().message()));
    return 1;
  }
  grpc_api::GrpcServerOptions gso;
  gso.host = c.host;
  gso.port = static_cast<int>(c.grpc_port);
  gso.api_key = c.api_key;
  gso.max_message_bytes = static_cast<int>(std::min<uint64_t>(c.max_body_size, 1u << 30));
  gso.prep_pool = &prep_pool;
  gso.chat_output = chat_output;
  gso.observer = [&m](const std::string& method, grpc::StatusCode code) {
    m.GrpcRequest(method, absl::StatusCodeToString(static_cast<absl::StatusCode>(code)))
        .Increment();
  };
  auto grpc_server = grpc_api::GrpcServer::Start(engine.get(), gso);
  if (!grpc_server.ok()) {
    LogError(std::string(grpc_server.status().message()));
    return 1;
  }
  LogInfo(absl::StrCat("serving ", facts->info.name, ": REST http://", c.host, ":",
                       (*http_server)->port(), "/v1 (OpenAI), gRPC ", (*grpc_server)->address(),
                       ", metrics http://", c.host, ":", (*http_server)->port(), "/metrics"),
          {{"model", model_path}, {"tp", std::to_string(tp)}});
  if (c.external_workers) {
    LogInfo(absl::StrCat("start the workers with: tessera-worker --controller ",
                         (*group)->control_address(), " --rank R   (R = 0..", tp - 1, ")"));
  }

  // Large requests leave freed heap behind; hand it back once the resident size has grown.
  MemoryTrimmer trimmer(std::chrono::seconds(1), 16ull << 20);

  std::thread starter([&] {
    absl::Status s = g->Start();
    if (!s.ok()) LogError(absl::StrCat("the workers did not come up: ", s.message()));
  });

  // Wait for SIGTERM / SIGINT (blocked in every thread; taken here).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  LogInfo(absl::StrCat("received ", sig == SIGTERM ? "SIGTERM" : "SIGINT", ": draining for up to ",
                       absl::FormatDuration(c.drain_timeout)));
  (*http_server)->StopAccepting();
  (*grpc_server)->StopAccepting();
  engine->StartDrain();
  const auto deadline = Clock::now() + Ms(c.drain_timeout);
  while (engine->InFlight() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (engine->InFlight() > 0) {
    LogWarning(absl::StrCat("drain timeout: ", engine->InFlight(), " request(s) still running"));
  }
  (*grpc_server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  (*http_server)->Stop();
  prep_pool.Stop();  // its tasks use the engine
  engine.reset();
  g->Shutdown();
  starter.join();
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace tessera::daemon

int main(int argc, char** argv) {
  // Block the stop signals before any thread starts, so only sigwait takes them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  tessera::daemon::TuneMalloc();

  auto config = tessera::config::LoadDaemonConfig(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "tesserad: %s\n(see tesserad --help)\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  if (config->show_help) {
    std::fputs(tessera::config::DaemonHelpText().c_str(), stdout);
    return 0;
  }
  if (config->show_version) {
    std::printf("tesserad %s\n", TESSERA_VERSION);
    return 0;
  }
  return tessera::daemon::Serve(*config);
}
