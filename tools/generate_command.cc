// tessera generate: offline generation with the CPU executor (no daemon).
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "common/chat/builtin_templates.h"
#include "common/chat/template.h"
#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "controller/serving/engine.h"
#include "controller/serving/request_validation.h"
#include "controller/serving/structured_output.h"
#include "nlohmann/json.hpp"
#include "tools/commands.h"
#include "tools/executor_flags.h"
#include "tools/format.h"
#include "tools/step_backend.h"
#include "worker/executor/executor.h"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: tessera generate --model FILE (--prompt TEXT | --prompt-tokens 1,2,3 | --chat MSG)\n"
    "                        [--max-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "                        [--min-p P] [--repetition-penalty R] [--presence-penalty P]\n"
    "                        [--frequency-penalty F] [--seed S] [--system TEXT]\n"
    "                        [--chat-template NAME|FILE] [--dtype D] [--exact] [--threads N]\n"
    "                        [--repack-weights auto|on|off]\n"
    "                        [--json-schema FILE | --json-object | --regex RE |\n"
    "                         --choice TEXT... | --grammar FILE] [--compact-json]\n"
    "                        [--json] [--verbose] [--device D] [--tp N [--worker-binary PATH]]\n"
    "\n"
    "Generates text with the executor (CPU cores, or a GPU with --device) and streams it to\n"
    "stdout. --prompt is tokenized with the model's BOS; --chat renders the message (after an\n"
    "optional --system message) with the model's chat template, or --chat-template (a\n"
    "built-in: chatml, llama3, deepseek3, glm4; or a .jinja file). Generation stops at an\n"
    "end-of-generation token, --max-tokens, or where the structured-output constraint is\n"
    "complete.\n"
    "\n"
    "  --max-tokens N          tokens to generate (default 128)\n"
    "  --temperature T         0 = greedy (default 0.8)\n"
    "  --top-k K               (default 40; 0 = off)\n"
    "  --top-p P               (default 0.95)\n"
    "  --min-p P               (default 0.05)\n"
    "  --seed S                same seed, same tokens (default: random)\n"
    "  --exact                 float32 exact path (see eval-logits)\n"
    "  --dtype D               auto|float32|bfloat16|float16 for the fast path\n"
    "  --threads N             worker threads (default: one per core; per worker with --tp)\n"
    "  --repack-weights M      auto (default), on, off: keep the int8 GEMM's weight panels\n"
    "                          from load (faster batched steps, about 2.2x the memory of\n"
    "                          q4_K weights; auto: while a quarter of free memory holds them)\n"
    "  --tp N                  run through N tessera-worker processes with tensor\n"
    "                          parallelism (Gloo), as tesserad does\n"
    "  --expert-parallel, --no-expert-parallel\n"
    "                          with --tp: routed experts whole per rank, or each one's\n"
    "                          hidden dim divided (default: chosen per model)\n"
    "  --device D              cpu (default), cuda (GPU 0) or cuda:N: the forward pass on\n"
    "                          that GPU; with --tp T, rank r on GPU N+r (NCCL between them)\n"
    "  --verbose               print the CPU, instruction set and the kernels chosen for\n"
    "                          this model on this machine, with the rates measured at load\n"
    "                          (with --tp, the workers log theirs)\n"
    "  --json-schema FILE      structured output: the text is valid JSON for this JSON\n"
    "                          Schema (the subset of README.md's structured output section)\n"
    "  --json-object           structured output: any JSON object (JSON mode)\n"
    "  --regex RE              structured output: the whole text matches RE\n"
    "  --choice TEXT           structured output: exactly one of the --choice values\n"
    "                          (repeat it)\n"
    "  --grammar FILE          structured output: a GBNF grammar (llama-server's format)\n"
    "  --compact-json          with --json-schema / --json-object: no optional whitespace\n"
    "  --json                  one JSON object per token ({\"token\", \"text\", \"logprob\"}),\n"
    "                          then a summary object with prompt_tokens, completion_tokens,\n"
    "                          prefill_tokens_per_s, decode_tokens_per_s, finish_reason\n";

struct Options {
  std::string model, prompt, prompt_tokens, chat, system, chat_template;
  int max_tokens = 128;
  bool json = false;
  // The daemon's definition and ranges (serving::ValidateSampling), so that a value means
  // and allows the same here as in a REST or gRPC request.
  serving::Sampling sampling;
  std::vector<int32_t> stop_token_ids;  // the model's end-of-generation tokens
  serving::StructuredOutput structured;
  std::string grammar;  // the GBNF `structured` compiles to
  executor::ExecutorOptions exec;
  BackendOptions backend;
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "tessera generate: %s\n", msg.c_str());
  return 1;
}

absl::StatusOr<std::vector<int32_t>> PromptTokens(const Options& o, const tokenizer::Tokenizer* tok,
                                                  const gguf::Metadata& md) {
  if (!o.prompt_tokens.empty()) {
    auto ids = ParseTokenList(o.prompt_tokens);
    if (!ids) return absl::InvalidArgumentError("--prompt-tokens: not a comma-separated id list");
    return *ids;
  }
  if (tok == nullptr)
    return absl::FailedPreconditionError("the model's tokenizer could not be loaded");
  std::string text = o.prompt;
  bool chat = !o.chat.empty();
  if (chat) {
    auto source = chat::ResolveChatTemplate(o.chat_template, md);
    if (!source.ok()) return source.status();
    auto tmpl = chat::ChatTemplate::Parse(*source);
    if (!tmpl.ok()) return tmpl.status();
    nlohmann::ordered_json vars;
    vars["messages"] = nlohmann::ordered_json::array();
    if (!o.system.empty()) vars["messages"].push_back({{"role", "system"}, {"content", o.system}});
    vars["messages"].push_back({{"role", "user"}, {"content", o.chat}});
    vars["add_generation_prompt"] = true;
    const auto& sp = tok->vocab().special();
    vars["bos_token"] = sp.bos >= 0 ? std::string(tok->Piece(sp.bos)) : "";
    vars["eos_token"] = sp.eos >= 0 ? std::string(tok->Piece(sp.eos)) : "";
    auto rendered = tmpl->Render(vars);
    if (!rendered.ok()) return rendered.status();
    text = *rendered;
  }
  tokenizer::EncodeOptions eo;
  eo.add_special = true;
  eo.parse_special = chat;
  eo.skip_duplicate_bos = true;
  return tok->Encode(text, eo);
}

int Generate(Options& o) {
  std::optional<tokenizer::Tokenizer> tok;
  if (auto t = tokenizer::Tokenizer::Open(o.model); t.ok()) {
    tok.emplace(*std::move(t));
  } else if (o.prompt_tokens.empty()) {
    return Fail(std::string(t.status().message()));
  }
  if (tok) {
    for (int32_t id = 0; id < static_cast<int32_t>(tok->vocab().size()); ++id) {
      if (tok->vocab().IsEndOfGeneration(id)) o.stop_token_ids.push_back(id);
    }
  }
  if (!o.sampling.seed) o.sampling.seed = std::random_device{}() * 0x100000001ull;

  auto file = gguf::GgufModel::Open(o.model);
  if (!file.ok()) return Fail(std::string(file.status().message()));
  auto prompt = PromptTokens(o, tok ? &*tok : nullptr, file->metadata());
  if (!prompt.ok()) return Fail(std::string(prompt.status().message()));
  if (prompt->empty()) return Fail("the prompt is empty");

  o.exec.kv_tokens = static_cast<int64_t>(prompt->size()) + o.max_tokens;
  auto runner = OpenStepRunner(o.model, o.exec, o.backend, /*verbose=*/!o.json);
  if (!runner.ok()) return Fail(std::string(runner.status().message()));

  // The prompt goes in chunks of kPrefillChunk tokens, as tesserad's scheduler feeds it
  // (--max-num-batched-tokens): a step's activations stay a few megabytes whatever the
  // prompt's length. The first chunk creates the sequence's sampler on rank 0, the last one
  // samples; each later step feeds back the token just sampled.
  constexpr size_t kPrefillChunk = 512;
  tessera::v1::StepRequest step;
  tessera::v1::StepSequence* seq = step.add_seqs();
  seq->set_seq_id(1);
  for (int b = 0; b < (*runner)->n_blocks(); ++b) seq->add_block_table(b);
  seq->set_new_sampler(true);
  *seq->mutable_sampling() = ToStepSampling(o.sampling, o.stop_token_ids);
  seq->mutable_sampling()->set_grammar(o.grammar);
  for (int32_t t : *prompt) seq->add_penalty_prompt(t);
  auto t0 = Clock::now();
  for (size_t start = 0; start + kPrefillChunk < prompt->size(); start += kPrefillChunk) {
    seq->set_start_pos(static_cast<int64_t>(start));
    seq->mutable_tokens()->Assign(prompt->begin() + start, prompt->begin() + start + kPrefillChunk);
    seq->set_sample(false);
    step.set_step_id(step.step_id() + 1);
    auto result = (*runner)->RunStep(step);
    if (!result.ok()) return Fail(std::string(result.status().message()));
    seq->set_new_sampler(false);
    seq->clear_sampling();
    seq->clear_penalty_prompt();
  }
  const size_t last = (prompt->size() - 1) / kPrefillChunk * kPrefillChunk;
  seq->set_start_pos(static_cast<int64_t>(last));
  seq->mutable_tokens()->Assign(prompt->begin() + last, prompt->end());
  seq->set_sample(true);
  std::optional<tokenizer::StreamingDetokenizer> detok;
  if (tok) {
    tokenizer::DecodeOptions dopt;
    dopt.render_special = false;
    detok.emplace(&*tok, dopt);
  }
  Clock::time_point t_first;
  int generated = 0;
  std::string finish = "length";
  while (generated < o.max_tokens) {
    step.set_step_id(step.step_id() + 1);
    auto result = (*runner)->RunStep(step);
    if (!result.ok()) return Fail(std::string(result.status().message()));
    if (generated == 0) t_first = Clock::now();
    const tessera::v1::SequenceResult& r = result->seqs(0);
    ++generated;
    if (r.end_of_generation()) {
      finish = "stop";
      break;
    }
    std::string text;
    if (detok) (void)detok->Feed(r.token(), &text);
    if (o.json) {
      nlohmann::json j = {{"token", r.token()}, {"text", text}, {"logprob", r.logprob()}};
      std::printf("%s\n", JsonDump(j).c_str());
    } else {
      std::fputs(tok ? text.c_str() : (std::to_string(r.token()) + " ").c_str(), stdout);
    }
    std::fflush(stdout);
    if (r.grammar_end()) {
      finish = "stop";  // the structured output is complete
      break;
    }
    seq->set_start_pos(seq->start_pos() + seq->tokens_size());
    seq->clear_tokens();
    seq->add_tokens(r.token());
    seq->set_new_sampler(false);
    seq->clear_sampling();
    seq->clear_penalty_prompt();
  }
  std::string tail;
  if (detok) detok->Finish(&tail);
  auto t1 = Clock::now();
  double prefill_s = std::chrono::duration<double>(t_first - t0).count();
  double decode_s = std::chrono::duration<double>(t1 - t_first).count();
  double prefill_tps = prompt->size() / std::max(prefill_s, 1e-9);
  double decode_tps = generated > 1 ? (generated - 1) / std::max(decode_s, 1e-9) : 0.0;
  if (o.json) {
    nlohmann::json j = {{"prompt_tokens", prompt->size()},
                        {"completion_tokens", generated},
                        {"prefill_tokens_per_s", prefill_tps},
                        {"decode_tokens_per_s", decode_tps},
                        {"finish_reason", finish},
                        {"seed", *o.sampling.seed}};
    if (!tail.empty()) std::printf("%s\n", JsonDump(nlohmann::json({{"text", tail}})).c_str());
    std::printf("%s\n", JsonDump(j).c_str());
  } else {
    std::printf("%s\n", tail.c_str());
    std::fprintf(stderr, "[%zu prompt tokens at %.1f tok/s, %d generated at %.1f tok/s, %s]\n",
                 prompt->size(), prefill_tps, generated, decode_tps, finish.c_str());
  }
  return 0;
}

bool ParseFloat(const std::string& v, float* out) { return absl::SimpleAtof(v, out); }

}  // namespace

int RunGenerate(const Args& args) {
  Options o;
  o.sampling.temperature = 0.8f;
  o.sampling.top_k = 40;
  o.sampling.top_p = 0.95f;
  o.sampling.min_p = 0.05f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--json") {
      o.json = true;
      continue;
    }
    if (a == "--json-object" || a == "--compact-json") {
      if (a == "--json-object") {
        o.structured.kind = serving::StructuredOutput::Kind::kJsonObject;
        o.structured.field = "--json-object";
      } else {
        o.structured.compact_json = true;
      }
      continue;
    }
    int used = ParseExecutorFlag(args, i, o.exec, "generate");
    if (used == 0) used = ParseBackendFlag(args, i, o.backend, "generate");
    if (used < 0) return 2;
    if (used > 0) {
      i += used - 1;
      continue;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "tessera generate: '%s' needs a value or is unknown\n\n%s", a.c_str(),
                   kUsage);
      return 2;
    }
    const std::string& v = args[++i];
    bool ok = true;
    if (a == "--model") {
      o.model = v;
    } else if (a == "--prompt") {
      o.prompt = v;
    } else if (a == "--prompt-tokens") {
      o.prompt_tokens = v;
    } else if (a == "--chat") {
      o.chat = v;
    } else if (a == "--system") {
      o.system = v;
    } else if (a == "--chat-template") {
      o.chat_template = v;
    } else if (a == "--max-tokens") {
      ok = absl::SimpleAtoi(v, &o.max_tokens) && o.max_tokens >= 1 && o.max_tokens <= 1000000;
    } else if (a == "--temperature") {
      ok = ParseFloat(v, &o.sampling.temperature);
    } else if (a == "--top-k") {
      ok = absl::SimpleAtoi(v, &o.sampling.top_k);
    } else if (a == "--top-p") {
      ok = ParseFloat(v, &o.sampling.top_p);
    } else if (a == "--min-p") {
      ok = ParseFloat(v, &o.sampling.min_p);
    } else if (a == "--repetition-penalty") {
      ok = ParseFloat(v, &o.sampling.repetition_penalty);
    } else if (a == "--presence-penalty") {
      ok = ParseFloat(v, &o.sampling.presence_penalty);
    } else if (a == "--frequency-penalty") {
      ok = ParseFloat(v, &o.sampling.frequency_penalty);
    } else if (a == "--json-schema" || a == "--grammar") {
      absl::StatusOr<std::string> text = ReadWholeFile(v);
      if (!text.ok()) {
        std::fprintf(stderr, "tessera generate: %s: %s\n", a.c_str(),
                     std::string(text.status().message()).c_str());
        return 2;
      }
      o.structured.kind = a == "--grammar" ? serving::StructuredOutput::Kind::kGrammar
                                           : serving::StructuredOutput::Kind::kJsonSchema;
      o.structured.field = a;
      o.structured.text = *std::move(text);
    } else if (a == "--regex") {
      o.structured.kind = serving::StructuredOutput::Kind::kRegex;
      o.structured.field = a;
      o.structured.text = v;
    } else if (a == "--choice") {
      o.structured.kind = serving::StructuredOutput::Kind::kChoice;
      o.structured.field = a;
      o.structured.choices.push_back(v);
    } else if (a == "--seed") {
      uint64_t seed;
      ok = absl::SimpleAtoi(v, &seed);
      o.sampling.seed = seed;
    } else {
      std::fprintf(stderr, "tessera generate: unknown option '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "tessera generate: %s: '%s' is not a valid value\n", a.c_str(),
                   v.c_str());
      return 2;
    }
  }
  int sources = !o.prompt.empty() + !o.prompt_tokens.empty() + !o.chat.empty();
  if (o.model.empty() || sources != 1) {
    std::fprintf(stderr,
                 "tessera generate: --model and exactly one of --prompt, --prompt-tokens, "
                 "--chat are required\n\n%s",
                 kUsage);
    return 2;
  }
  if (absl::Status s = serving::ValidateSampling(o.sampling); !s.ok()) {
    std::fprintf(stderr, "tessera generate: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  absl::StatusOr<std::string> grammar = serving::CompileStructuredOutput(o.structured);
  if (!grammar.ok()) {
    std::fprintf(stderr, "tessera generate: %s\n", std::string(grammar.status().message()).c_str());
    return 2;
  }
  o.grammar = *std::move(grammar);
  return Generate(o);
}

}  // namespace tessera::cli
