// Chat template rendering: parse once, then render a 50-message conversation (system, then
// alternating user/assistant turns of ~300 bytes with some non-ASCII and reasoning). The
// baseline builds the same ChatML prompt with plain string appends, so ChatML's ratio to it
// is the engine's overhead over the unavoidable copying.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/chat/builtin_templates.h"
#include "common/chat/template.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"

namespace tessera::chat {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMessages = 50;

Json Conversation() {
  Json messages = Json::array();
  messages.push_back(
      {{"role", "system"}, {"content", "You are a helpful assistant. Answer briefly."}});
  for (int i = 1; i < kMessages; ++i) {
    std::string text = "Turn " + std::to_string(i) + ": ";
    while (text.size() < 300)
      text += "the quick brown fox — 速い茶色の狐 — jumps over the lazy dog. ";
    Json m = {{"role", i % 2 == 1 ? "user" : "assistant"}, {"content", text}};
    if (i % 2 == 0) m["reasoning_content"] = "Thinking about turn " + std::to_string(i) + ".";
    messages.push_back(std::move(m));
  }
  return {{"messages", messages}, {"add_generation_prompt", true},
          {"bos_token", "<s>"},   {"eos_token", "</s>"},
          {"tools", nullptr},     {"documents", nullptr}};
}

std::string ReadShared(const std::string& relative) {
  auto path = testing::ConformancePath(relative);
  if (!path) return "";
  std::ifstream in(*path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void RenderBench(benchmark::State& state, const std::string& source) {
  if (source.empty()) {
    state.SkipWithError("template not available (shared conformance data absent)");
    return;
  }
  auto tmpl = ChatTemplate::Parse(source);
  if (!tmpl.ok()) {
    state.SkipWithError(std::string(tmpl.status().message()).c_str());
    return;
  }
  const Json vars = Conversation();
  const std::tm now = MakeTime(2026, 1, 15, 12, 0, 0);
  size_t bytes = 0;
  for (auto _ : state) {
    auto out = tmpl->Render(vars, now);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    bytes = out->size();
    benchmark::DoNotOptimize(out->data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["messages/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kMessages), benchmark::Counter::kIsRate);
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}

void BM_Baseline_ChatmlConcat(benchmark::State& state) {
  const Json vars = Conversation();
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out;
    for (const auto& m : vars["messages"]) {
      out += "<|im_start|>";
      out += m["role"].get_ref<const std::string&>();
      out += "\n";
      out += m["content"].get_ref<const std::string&>();
      out += "<|im_end|>\n";
    }
    out += "<|im_start|>assistant\n";
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Baseline_ChatmlConcat);

void BM_Render_Chatml(benchmark::State& state) { RenderBench(state, *BuiltinTemplate("chatml")); }
BENCHMARK(BM_Render_Chatml);

void BM_Render_Glm4(benchmark::State& state) { RenderBench(state, *BuiltinTemplate("glm4")); }
BENCHMARK(BM_Render_Glm4);

void BM_Render_Qwen3(benchmark::State& state) {
  RenderBench(state, ReadShared("chat/Qwen-Qwen3-0.6B.jinja"));
}
BENCHMARK(BM_Render_Qwen3);

void BM_Render_Llama31(benchmark::State& state) {
  RenderBench(state, ReadShared("chat/meta-llama-Llama-3.1-8B-Instruct.jinja"));
}
BENCHMARK(BM_Render_Llama31);

void BM_Render_DeepSeekV31(benchmark::State& state) {
  RenderBench(state, ReadShared("chat/deepseek-ai-DeepSeek-V3.1.jinja"));
}
BENCHMARK(BM_Render_DeepSeekV31);

void BM_Parse_Glm4(benchmark::State& state) {
  const std::string source = *BuiltinTemplate("glm4");
  for (auto _ : state) {
    auto tmpl = ChatTemplate::Parse(source);
    benchmark::DoNotOptimize(tmpl.ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * source.size()));
}
BENCHMARK(BM_Parse_Glm4);

}  // namespace
}  // namespace tessera::chat

BENCHMARK_MAIN();
