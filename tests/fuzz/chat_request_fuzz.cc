// libFuzzer target for the chat-request path as tesserad runs it, without an engine or
// workers: the bytes are the body of `POST /v1/chat/completions`, and each input goes
//   ParseCompletionRequest (REST gateway parsing and validation)
//   -> the engine's chat prompt (serving::ChatPromptTokens: size bounds, the template render
//      with the request's bytes tracked, tokenization with special tokens parsed only in the
//      template's own text)
//   -> Submit's checks (ValidateRequest against the deployment's limits) and the output-text
//      state a request gets (OutputText with its stop strings), fed the prompt's tokens,
// with every rejection turned into the OpenAI error body as the gateway does.
//
// The models are the project's synthetic ones (common/model/synthetic.h; the llama "tiny"
// preset is tesserad's embedded default model), built once at start-up and loaded through
// serving::LoadModelText as tesserad loads them. One configuration per input, chosen by the
// body's length (so that every seed stays a plain JSON body): the default model with its own
// template, and the built-in templates (common/chat/builtin_templates.h) over the vocabulary
// of their family.
//
// A request body comes from any client, so every failure must be a Status (an error
// response), never a crash, an exception, a hang or unbounded memory.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/chat/template.h"
#include "common/gguf/metadata.h"
#include "common/model/synthetic.h"
#include "common/tokenizer/tokenizer.h"
#include "controller/http/openai_errors.h"
#include "controller/http/openai_request.h"
#include "controller/serving/engine.h"
#include "controller/serving/model_text.h"
#include "controller/serving/output_text.h"
#include "controller/serving/request_validation.h"
#include "nlohmann/json.hpp"

namespace {

using tessera::serving::ChatMessage;

struct Served {
  std::string name;  // for messages only
  tessera::serving::ModelText text;
  int64_t max_model_len = 0;
};

std::vector<std::unique_ptr<Served>>* g_models = nullptr;
// CHAT_REQUEST_FUZZ_VERBOSE=1: print how far each input got (for triage, with -runs=0).
bool g_verbose = false;

void Trace(const Served& m, const char* stage, const std::string& detail) {
  if (g_verbose) std::fprintf(stderr, "[%s] %s: %s\n", m.name.c_str(), stage, detail.c_str());
}

void Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "chat_request_fuzz: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::abort();
}

std::unique_ptr<Served> Load(const std::string& arch, const std::string& template_override) {
  tessera::model::SyntheticOptions o;
  o.arch = arch;
  o.preset = "tiny";
  auto w = tessera::model::BuildSyntheticModel(o);
  if (!w.ok()) Die(arch, w.status());
  const tessera::gguf::Metadata& md = w->metadata();
  auto text = tessera::serving::LoadModelText(md, template_override);
  if (!text.ok()) Die(arch + " " + template_override, text.status());
  if (!text->chat_template.has_value()) {
    Die(arch, absl::InternalError(text->chat_template_problem));
  }
  auto served =
      std::make_unique<Served>(Served{arch + "/" + template_override, *std::move(text), 0});
  // tesserad: max_model_len = the model's context length unless configured.
  auto ctx = md.GetInt(arch + ".context_length");
  served->max_model_len = ctx.ok() && *ctx > 0 ? *ctx : 4096;
  return served;
}

// The engine's chat prompt: serving::ChatPromptTokens, as ServingEngine calls it, with
// ServingEngine's default limits (at most max_prompt_tokens messages, 32 bytes per prompt
// token for the contents and the rendered prompt) and a fixed time for strftime_now(), for
// deterministic runs.
absl::StatusOr<std::vector<int32_t>> ChatPromptTokens(const Served& m,
                                                      const std::vector<ChatMessage>& messages,
                                                      bool add_generation_prompt) {
  tessera::serving::PromptLimits limits;
  limits.max_chat_messages = m.max_model_len;
  limits.max_prompt_bytes = 32 * static_cast<uint64_t>(m.max_model_len);
  static const std::tm now = tessera::chat::MakeTime(2026, 1, 15, 12, 0, 0);
  return tessera::serving::ChatPromptTokens(m.text.tokenizer, *m.text.chat_template, messages,
                                            add_generation_prompt, limits, &now);
}

// The gateway answers a failure with ErrorResponse(ApiErrorFromStatus(status)); building
// the body must not throw (invalid UTF-8 in a message is replaced).
void Reject(const absl::Status& status, const char* default_param = "") {
  tessera::http::ApiError error = tessera::http::ApiErrorFromStatus(status);
  if (error.status == 400 && error.param.empty()) error.param = default_param;
  tessera::http::HttpResponse response = tessera::http::ErrorResponse(error);
  if (response.body.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  g_verbose = std::getenv("CHAT_REQUEST_FUZZ_VERBOSE") != nullptr;
  g_models = new std::vector<std::unique_ptr<Served>>;
  g_models->push_back(Load("llama", ""));  // tesserad's embedded default model
  g_models->push_back(Load("llama", "llama3"));
  g_models->push_back(Load("qwen2", "chatml"));
  g_models->push_back(Load("deepseek2", "deepseek3"));
  g_models->push_back(Load("glm4moe", "glm4"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Served& m = *(*g_models)[size % g_models->size()];
  const std::string body(reinterpret_cast<const char*>(data), size);

  // Gateway::HandleGeneration, chat route.
  absl::StatusOr<tessera::http::CompletionParams> params =
      tessera::http::ParseCompletionRequest(body, tessera::http::Endpoint::kChatCompletions);
  if (!params.ok()) {
    Trace(m, "parse", params.status().ToString());
    Reject(params.status());
    return 0;
  }
  if (params->messages.empty()) std::abort();  // the parser promises a non-empty list
  // (A `model` other than the served one is a 404 unless accept_any_model_name; carry on as
  // that option does, to reach the rest of the path.)
  absl::StatusOr<std::vector<int32_t>> ids = ChatPromptTokens(m, params->messages, true);
  if (!ids.ok()) {
    Trace(m, "prompt", ids.status().ToString());
    Reject(ids.status(), "messages");
    return 0;
  }
  std::vector<int32_t> prompt = *std::move(ids);
  if (prompt.empty()) {
    Reject(absl::InvalidArgumentError("the prompt is empty"), "messages");
    return 0;
  }

  // GenerationCall builds one GenerateRequest per choice; ServingEngine::Submit checks it
  // against the deployment's limits (tesserad's defaults for this model).
  tessera::serving::GenerateRequest request;
  request.request_id = "chatcmpl-fuzz";
  request.prompt_tokens = prompt;
  request.sampling = params->sampling;
  request.max_tokens = params->max_tokens;
  request.stop = params->stop;
  request.ignore_eos = params->ignore_eos;
  request.logprobs = params->logprobs;
  request.top_logprobs = params->top_logprobs;
  tessera::serving::RequestLimits limits;
  limits.max_model_len = m.max_model_len;
  limits.max_prompt_tokens = m.max_model_len;
  limits.n_vocab = m.text.tokenizer.vocab().size();
  absl::StatusOr<int32_t> max_tokens = tessera::serving::ValidateRequest(request, limits);
  if (!max_tokens.ok()) {
    Trace(m, "validate", max_tokens.status().ToString());
    Reject(max_tokens.status());
    return 0;
  }
  if (*max_tokens <= 0) std::abort();

  // The request's output text with its stop strings, fed the prompt's own tokens as if the
  // model echoed them (bounded, as max_tokens bounds a real request).
  tessera::serving::OutputText output(&m.text.tokenizer, request.stop);
  std::string out;
  const size_t steps = std::min<size_t>(prompt.size(), 512);
  bool stopped = false;
  for (size_t i = 0; i < steps && !stopped; ++i) stopped = output.Append(prompt[i], &out);
  if (!stopped) output.Finish(&out);
  // The text goes out in a JSON response.
  const std::string response = tessera::http::DumpJson(nlohmann::json{{"content", out}});
  Trace(m, "ok",
        absl::StrCat(prompt.size(), " prompt tokens, max_tokens ", *max_tokens,
                     stopped ? ", stopped: " : ", text: ", response));
  return 0;
}
