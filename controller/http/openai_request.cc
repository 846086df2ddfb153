#include "controller/http/openai_request.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "controller/http/openai_errors.h"
#include "controller/serving/request_validation.h"

namespace tessera::http {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Field readers: absent or null leaves `out` as it was. They check the JSON type; the
// ranges of what generation uses are serving's (see ValidateGenerationOptions below).
absl::Status ReadNumber(const json& body, const char* name, float* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return InvalidParam(name, absl::StrCat("'", name, "' must be a number"));
  const double v = it->get<double>();
  // Beyond float's range the conversion is undefined: such a value is infinite (and out of
  // every range serving allows).
  constexpr double kMax = std::numeric_limits<float>::max();
  *out = std::fabs(v) <= kMax ? static_cast<float>(v)
                              : std::copysign(std::numeric_limits<float>::infinity(), v);
  return absl::OkStatus();
}

absl::Status ReadInt(const json& body, const char* name, int64_t lo, int64_t hi, int64_t* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  const auto out_of_range = [&] {
    return InvalidParam(
        name, absl::StrCat("'", name, "' must be between ", lo, " and ", hi, ", got ", it->dump()));
  };
  // The value as an int64_t, converted only once it is known to fit (a double of 2^63 or an
  // unsigned above INT64_MAX does not, and converting it would be undefined or wrap).
  int64_t v = 0;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return out_of_range();
    v = static_cast<int64_t>(u);
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else if (it->is_number_float()) {
    // 5.0 is accepted as 5, as Python's OpenAI servers do; 5.5 is not.
    const double d = it->get<double>();
    if (std::floor(d) != d || !std::isfinite(d)) {
      return InvalidParam(name, absl::StrCat("'", name, "' must be an integer"));
    }
    if (d < -0x1p63 || d >= 0x1p63) return out_of_range();
    v = static_cast<int64_t>(d);
  } else {
    return InvalidParam(name, absl::StrCat("'", name, "' must be an integer"));
  }
  if (v < lo || v > hi) return out_of_range();
  *out = v;
  return absl::OkStatus();
}

absl::Status ReadBool(const json& body, const char* name, bool* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return InvalidParam(name, absl::StrCat("'", name, "' must be a boolean"));
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status ReadString(const json& body, const char* name, std::string* out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return InvalidParam(name, absl::StrCat("'", name, "' must be a string"));
  *out = it->get<std::string>();
  return absl::OkStatus();
}

// vLLM's cache_salt: a non-empty string when present (its length is serving's to check).
absl::Status ReadCacheSalt(const json& body, std::string* out) {
  if (absl::Status s = ReadString(body, "cache_salt", out); !s.ok()) return s;
  auto it = body.find("cache_salt");
  if (it != body.end() && it->is_string() && out->empty()) {
    return InvalidParam("cache_salt", "'cache_salt' must be a non-empty string when given");
  }
  return absl::OkStatus();
}

// Every string as sent, empty ones too (so that serving's errors name the right index);
// ParseCompletionRequest drops the empty ones once they are checked.
absl::Status ReadStop(const json& body, std::vector<std::string>* out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    out->push_back(it->get<std::string>());
    return absl::OkStatus();
  }
  if (!it->is_array()) {
    return InvalidParam("stop", "'stop' must be a string or a list of strings");
  }
  for (const json& s : *it) {
    if (!s.is_string()) return InvalidParam("stop", "'stop' must be a string or a list of strings");
    out->push_back(s.get<std::string>());
  }
  return absl::OkStatus();
}

// A message's content: a string, a non-empty list of {"type": "text", "text": ...} parts,
// or (assistant messages only, as OpenAI allows for those that carry tool calls) null.
absl::StatusOr<std::string> ReadContent(const json& content, size_t index, bool null_allowed) {
  const std::string param = absl::StrCat("messages[", index, "].content");
  if (content.is_null() && null_allowed) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array() || content.empty()) {
    return InvalidParam(param, absl::StrCat("'", param,
                                            "' must be a string or a non-empty list "
                                            "of text parts",
                                            null_allowed ? " (or null)" : ""));
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string part_param = absl::StrCat(param, "[", i, "]");
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return InvalidParam(part_param,
                          absl::StrCat("'", part_param, "' must be an object with a 'type'"));
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "text") {
      return InvalidParam(part_param, absl::StrCat("'", part_param, "' has type '", type,
                                                   "'; only 'text' parts are supported"));
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      return InvalidParam(part_param, absl::StrCat("'", part_param, ".text' must be a string"));
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's `tool_calls` ([{id, type: "function", function: {name,
// arguments}}]) and a tool message's `tool_call_id` and `name`, checked; null when none.
absl::StatusOr<ojson> ReadMessageExtras(const json& m, const std::string& param, bool assistant,
                                        bool tool) {
  ojson extras = nullptr;
  auto calls = m.find("tool_calls");
  if (calls != m.end() && !calls->is_null()) {
    const std::string p = param + ".tool_calls";
    if (!assistant) {
      return InvalidParam(p, absl::StrCat("'", p, "' is only allowed in assistant messages"));
    }
    if (!calls->is_array()) return InvalidParam(p, absl::StrCat("'", p, "' must be a list"));
    for (size_t j = 0; j < calls->size(); ++j) {
      const json& c = (*calls)[j];
      const std::string cp = absl::StrCat(p, "[", j, "]");
      if (!c.is_object()) return InvalidParam(cp, absl::StrCat("'", cp, "' must be an object"));
      auto id = c.find("id");
      if (id != c.end() && !id->is_string()) {
        return InvalidParam(cp + ".id", absl::StrCat("'", cp, ".id' must be a string"));
      }
      auto type = c.find("type");
      if (type != c.end() && (!type->is_string() || *type != "function")) {
        return InvalidParam(cp + ".type", absl::StrCat("'", cp, ".type' must be 'function'"));
      }
      auto fn = c.find("function");
      if (fn == c.end() || !fn->is_object()) {
        return InvalidParam(cp + ".function",
                            absl::StrCat("'", cp, ".function' must be an object"));
      }
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string()) {
        return InvalidParam(cp + ".function.name",
                            absl::StrCat("'", cp, ".function.name' must be a string"));
      }
      auto args = fn->find("arguments");
      if (args != fn->end() && !args->is_string() && !args->is_object()) {
        return InvalidParam(cp + ".function.arguments",
                            absl::StrCat("'", cp, ".function.arguments' must be a string"));
      }
    }
    extras = ojson::object();
    extras["tool_calls"] = ojson::parse(calls->dump());
  }
  for (const char* key : {"tool_call_id", "name"}) {
    auto it = m.find(key);
    if (it == m.end() || it->is_null()) continue;
    const std::string p = absl::StrCat(param, ".", key);
    if (!it->is_string()) return InvalidParam(p, absl::StrCat("'", p, "' must be a string"));
    if (std::string(key) == "tool_call_id" && !tool) {
      return InvalidParam(p, absl::StrCat("'", p, "' is only allowed in tool messages"));
    }
    if (extras.is_null()) extras = ojson::object();
    extras[key] = it->get<std::string>();
  }
  return extras;
}

absl::Status ReadMessages(const json& body, CompletionParams* params) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    return InvalidParam("messages", "'messages' is a required property");
  }
  if (!it->is_array() || it->empty()) {
    return InvalidParam("messages", "'messages' must be a non-empty list of messages");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return InvalidParam(param, absl::StrCat("'", param, "' must be an object"));
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      return InvalidParam(param + ".role", absl::StrCat("'", param, ".role' must be a string"));
    }
    const std::string r = role->get<std::string>();
    if (absl::Status s = serving::ValidateChatRole(r, param + ".role"); !s.ok()) return s;
    const bool assistant = r == "assistant";
    auto content = m.find("content");
    if (content == m.end() && !assistant) {
      return InvalidParam(param + ".content",
                          absl::StrCat("'", param, ".content' is a required property"));
    }
    absl::StatusOr<std::string> text =
        content == m.end() ? std::string() : ReadContent(*content, i, /*null_allowed=*/assistant);
    if (!text.ok()) return text.status();
    params->messages.push_back({r, *std::move(text)});
    absl::StatusOr<ojson> extras = ReadMessageExtras(m, param, assistant, r == "tool");
    if (!extras.ok()) return extras.status();
    params->tool_calling.message_extras.push_back(*std::move(extras));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> ReadTokenIds(const json& list) {
  std::vector<int32_t> ids;
  for (const json& t : list) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
        t.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return InvalidParam("prompt", "'prompt' token ids must be non-negative integers");
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

// A string, a list of one string, a list of token ids, or a list of one list of ids.
absl::Status ReadPrompt(const json& body, CompletionParams* params) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) {
    return InvalidParam("prompt", "'prompt' is a required property");
  }
  const json* p = &*it;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    p = &(*p)[0];
  } else if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
    return InvalidParam("prompt",
                        "'prompt' with several prompts is not supported; send one "
                        "prompt per request (or use 'n' for several completions)");
  }
  if (p->is_string()) {
    params->prompt_text = p->get<std::string>();
    return absl::OkStatus();
  }
  if (p->is_array() && !p->empty()) {
    absl::StatusOr<std::vector<int32_t>> ids = ReadTokenIds(*p);
    if (!ids.ok()) return ids.status();
    params->prompt_tokens = *std::move(ids);
    return absl::OkStatus();
  }
  return InvalidParam("prompt", "'prompt' must be a string or a non-empty list of token ids");
}

absl::Status ReadLogprobs(const json& body, CompletionParams* params) {
  int64_t top = 0;
  if (params->endpoint == Endpoint::kChatCompletions) {
    if (absl::Status s = ReadBool(body, "logprobs", &params->logprobs); !s.ok()) return s;
    if (absl::Status s = ReadInt(body, "top_logprobs", kInt32Min, kInt32Max, &top); !s.ok()) {
      return s;
    }
    if (top > 0 && !params->logprobs) {
      return InvalidParam("top_logprobs", "'top_logprobs' requires 'logprobs' to be true");
    }
  } else {
    // Completions: `logprobs` is the number of alternatives (0 still returns the chosen
    // token's log-probability).
    auto it = body.find("logprobs");
    if (it != body.end() && !it->is_null()) {
      if (it->is_boolean()) {
        return InvalidParam("logprobs", "'logprobs' must be an integer for /v1/completions");
      }
      if (absl::Status s = ReadInt(body, "logprobs", kInt32Min, kInt32Max, &top); !s.ok()) {
        return s;
      }
      params->logprobs = true;
    }
  }
  params->top_logprobs = static_cast<int32_t>(top);
  return absl::OkStatus();
}

absl::Status ReadSampling(const json& body, CompletionParams* params) {
  serving::Sampling& s = params->sampling;
  absl::Status st = ReadNumber(body, "temperature", &s.temperature);
  if (st.ok()) st = ReadNumber(body, "top_p", &s.top_p);
  if (st.ok()) st = ReadNumber(body, "min_p", &s.min_p);
  if (st.ok()) st = ReadNumber(body, "presence_penalty", &s.presence_penalty);
  if (st.ok()) st = ReadNumber(body, "frequency_penalty", &s.frequency_penalty);
  if (st.ok()) st = ReadNumber(body, "repetition_penalty", &s.repetition_penalty);
  int64_t top_k = s.top_k;
  if (st.ok()) st = ReadInt(body, "top_k", kInt32Min, kInt32Max, &top_k);
  s.top_k = static_cast<int32_t>(top_k);
  if (st.ok() && body.contains("seed") && !body["seed"].is_null()) {
    int64_t seed = 0;
    st = ReadInt(body, "seed", std::numeric_limits<int64_t>::min(),
                 std::numeric_limits<int64_t>::max(), &seed);
    if (st.ok()) s.seed = static_cast<uint64_t>(seed);
  }
  return st;
}

absl::Status ReadLimits(const json& body, CompletionParams* params) {
  int64_t max_tokens = 0;
  const int64_t kMax = std::numeric_limits<int32_t>::max();
  if (absl::Status s = ReadInt(body, "max_tokens", 1, kMax, &max_tokens); !s.ok()) return s;
  if (params->endpoint == Endpoint::kChatCompletions) {
    // The newer name wins when both are sent.
    if (absl::Status s = ReadInt(body, "max_completion_tokens", 1, kMax, &max_tokens); !s.ok()) {
      return s;
    }
  }
  params->max_tokens = static_cast<int32_t>(max_tokens);
  int64_t n = 1;
  if (absl::Status s = ReadInt(body, "n", 1, kMaxChoices, &n); !s.ok()) return s;
  params->n = static_cast<int>(n);
  return absl::OkStatus();
}

absl::Status ReadStreaming(const json& body, CompletionParams* params) {
  if (absl::Status s = ReadBool(body, "stream", &params->stream); !s.ok()) return s;
  auto it = body.find("stream_options");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!params->stream) {
    return InvalidParam("stream_options", "'stream_options' is only allowed when 'stream' is true");
  }
  if (!it->is_object()) return InvalidParam("stream_options", "'stream_options' must be an object");
  auto usage = it->find("include_usage");
  if (usage != it->end() && !usage->is_null()) {
    if (!usage->is_boolean()) {
      return InvalidParam("stream_options.include_usage",
                          "'stream_options.include_usage' must be a boolean");
    }
    params->include_usage = usage->get<bool>();
  }
  return absl::OkStatus();
}

// Structured output. One constraint per request, from any of the fields clients use:
//   response_format: {"type": "text" | "json_object" | "json_schema",
//                     "json_schema": {"name", "schema", "strict", "description"}}  (OpenAI)
//     llama-server's {"type": "json_object", "schema": {...}} is a JSON schema too;
//   structured_outputs: {"json" | "regex" | "choice" | "grammar" | "json_object",
//                        "disable_any_whitespace"}                            (vLLM >= 0.10)
//   guided_json, guided_regex, guided_choice, guided_grammar                  (vLLM before)
//   json_schema, grammar                                                      (llama-server)
// Backend selectors (vLLM's guided_decoding_backend, structured_outputs.backend, ...) are
// accepted and ignored: Tessera has one engine.
using StructuredOutput = serving::StructuredOutput;

// Sets `out` from a JSON schema value (an object, true/false, or a string holding JSON).
absl::Status SchemaInto(const ojson& v, const std::string& param, StructuredOutput* out) {
  out->kind = StructuredOutput::Kind::kJsonSchema;
  out->field = param;
  if (v.is_string()) {
    const ojson parsed = ojson::parse(v.get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) {
      return InvalidParam(param, absl::StrCat("'", param, "' is a string that is not valid JSON"));
    }
    out->text = parsed.dump();
    return absl::OkStatus();
  }
  if (!v.is_object() && !v.is_boolean()) {
    return InvalidParam(param, absl::StrCat("'", param, "' must be a JSON schema (an object)"));
  }
  out->text = v.dump();
  return absl::OkStatus();
}

absl::Status StringInto(const ojson& v, const std::string& param, StructuredOutput::Kind kind,
                        StructuredOutput* out) {
  if (!v.is_string()) return InvalidParam(param, absl::StrCat("'", param, "' must be a string"));
  out->kind = kind;
  out->field = param;
  out->text = v.get<std::string>();
  return absl::OkStatus();
}

absl::Status ChoicesInto(const ojson& v, const std::string& param, StructuredOutput* out) {
  if (!v.is_array() || v.empty()) {
    return InvalidParam(param, absl::StrCat("'", param, "' must be a non-empty array of strings"));
  }
  out->kind = StructuredOutput::Kind::kChoice;
  out->field = param;
  out->choices.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return InvalidParam(param, absl::StrCat("'", param, "[", i, "]' must be a string"));
    }
    out->choices.push_back(v[i].get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadResponseFormat(const ojson& rf, StructuredOutput* out) {
  if (!rf.is_object())
    return InvalidParam("response_format", "'response_format' must be an object");
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string()) {
    return InvalidParam(
        "response_format.type",
        "'response_format.type' must be one of 'text', 'json_object', 'json_schema'");
  }
  const std::string t = type->get<std::string>();
  if (t == "text") return absl::OkStatus();
  if (t == "json_object") {
    auto schema = rf.find("schema");  // llama-server's form
    if (schema != rf.end() && !schema->is_null()) {
      return SchemaInto(*schema, "response_format.schema", out);
    }
    out->kind = StructuredOutput::Kind::kJsonObject;
    out->field = "response_format";
    return absl::OkStatus();
  }
  if (t == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object()) {
      return InvalidParam("response_format.json_schema",
                          "'response_format.json_schema' must be an object with a 'schema'");
    }
    auto strict = js->find("strict");
    if (strict != js->end() && !strict->is_null() && !strict->is_boolean()) {
      return InvalidParam("response_format.json_schema.strict",
                          "'response_format.json_schema.strict' must be a boolean");
    }
    auto schema = js->find("schema");
    if (schema == js->end() || schema->is_null()) {
      // OpenAI treats a missing schema as "any JSON"; an object is what clients want.
      out->kind = StructuredOutput::Kind::kJsonSchema;
      out->field = "response_format.json_schema.schema";
      out->text = "{}";
      return absl::OkStatus();
    }
    return SchemaInto(*schema, "response_format.json_schema.schema", out);
  }
  return InvalidParam("response_format.type",
                      absl::StrCat("'response_format.type' must be one of 'text', 'json_object', "
                                   "'json_schema', got ",
                                   type->dump().substr(0, 64)));
}

absl::Status ReadVllmStructuredOutputs(const ojson& so, StructuredOutput* out) {
  const std::string base = "structured_outputs";
  if (!so.is_object()) return InvalidParam(base, "'structured_outputs' must be an object");
  int given = 0;
  for (const auto& [key, v] : so.items()) {
    const std::string param = absl::StrCat(base, ".", key);
    if (v.is_null()) continue;
    absl::Status s;
    if (key == "json") {
      s = SchemaInto(v, param, out);
      ++given;
    } else if (key == "regex") {
      s = StringInto(v, param, StructuredOutput::Kind::kRegex, out);
      ++given;
    } else if (key == "choice") {
      s = ChoicesInto(v, param, out);
      ++given;
    } else if (key == "grammar") {
      s = StringInto(v, param, StructuredOutput::Kind::kGrammar, out);
      ++given;
    } else if (key == "json_object") {
      if (!v.is_boolean())
        return InvalidParam(param, absl::StrCat("'", param, "' must be a boolean"));
      if (v.get<bool>()) {
        out->kind = StructuredOutput::Kind::kJsonObject;
        out->field = param;
        ++given;
      }
    } else if (key == "disable_any_whitespace") {
      if (!v.is_boolean())
        return InvalidParam(param, absl::StrCat("'", param, "' must be a boolean"));
      out->compact_json = v.get<bool>();
    } else if (key == "backend" || key == "disable_fallback" || key == "whitespace_pattern" ||
               key == "disable_additional_properties" || key == "_backend" ||
               key == "_backend_was_auto") {
      // Backend selection and fallbacks: one engine here, nothing to choose.
      continue;
    } else {
      return InvalidParam(param, absl::StrCat("'", param,
                                              "' is not supported (supported: json, "
                                              "regex, choice, grammar, json_object, "
                                              "disable_any_whitespace)"));
    }
    if (!s.ok()) return s;
  }
  if (given > 1) {
    return InvalidParam(base,
                        "'structured_outputs' may give only one of json, regex, choice, "
                        "grammar, json_object");
  }
  return absl::OkStatus();
}

absl::Status ReadStructuredOutput(const std::string& body_text, const json& sorted_body,
                                  CompletionParams* params) {
  static constexpr const char* kFields[] = {
      "response_format", "structured_outputs", "guided_json", "guided_regex",
      "guided_choice",   "guided_grammar",     "json_schema", "grammar"};
  bool any = false;
  for (const char* f : kFields) any = any || sorted_body.contains(f);
  if (!any) return absl::OkStatus();
  // Again, keeping the order of object keys: a schema's properties are written in the order
  // its author gave them (OpenAI's strict mode promises it).
  const ojson body = ojson::parse(body_text, nullptr, false);
  StructuredOutput so;
  std::string first;  // the field that set a constraint
  auto take = [&](const char* name, const std::function<absl::Status(const ojson&)>& read) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return absl::OkStatus();
    // Every reader that sets a constraint names its field.
    const std::string before = so.field;
    if (absl::Status s = read(*it); !s.ok()) return s;
    if (so.field == before) return absl::OkStatus();
    if (!first.empty()) {
      return InvalidParam(
          name, absl::StrCat("'", name, "' and '", first, "' both constrain the output; give one"));
    }
    first = name;
    return absl::OkStatus();
  };
  absl::Status s =
      take("response_format", [&](const ojson& v) { return ReadResponseFormat(v, &so); });
  if (s.ok()) {
    s = take("structured_outputs",
             [&](const ojson& v) { return ReadVllmStructuredOutputs(v, &so); });
  }
  if (s.ok())
    s = take("guided_json", [&](const ojson& v) { return SchemaInto(v, "guided_json", &so); });
  if (s.ok()) {
    s = take("guided_regex", [&](const ojson& v) {
      return StringInto(v, "guided_regex", StructuredOutput::Kind::kRegex, &so);
    });
  }
  if (s.ok()) {
    s = take("guided_choice", [&](const ojson& v) { return ChoicesInto(v, "guided_choice", &so); });
  }
  if (s.ok()) {
    s = take("guided_grammar", [&](const ojson& v) {
      return StringInto(v, "guided_grammar", StructuredOutput::Kind::kGrammar, &so);
    });
  }
  if (s.ok())
    s = take("json_schema", [&](const ojson& v) { return SchemaInto(v, "json_schema", &so); });
  if (s.ok()) {
    s = take("grammar", [&](const ojson& v) {
      return StringInto(v, "grammar", StructuredOutput::Kind::kGrammar, &so);
    });
  }
  if (!s.ok()) return s;
  absl::StatusOr<std::string> gbnf = serving::CompileStructuredOutput(so);
  if (!gbnf.ok()) return gbnf.status();
  params->structured_output = std::move(so);
  params->grammar = *std::move(gbnf);
  return absl::OkStatus();
}

// Chat: `tools` ([{type: "function", function: {name, description?, parameters?}}]),
// `tool_choice` ("auto", "none", "required" or {type: "function", function: {name}}),
// `parallel_tool_calls` and `chat_template_kwargs` (an object).
absl::Status ReadTools(const std::string& body_text, const json& sorted_body,
                       CompletionParams* params) {
  bool any = false;
  for (const char* f : {"tools", "tool_choice", "chat_template_kwargs"}) {
    auto it = sorted_body.find(f);
    any = any || (it != sorted_body.end() && !it->is_null());
  }
  if (absl::Status s = ReadBool(sorted_body, "parallel_tool_calls", &params->tool_calling.parallel);
      !s.ok()) {
    return s;
  }
  if (!any) return absl::OkStatus();
  serving::ToolCalling& tc = params->tool_calling;
  // Keeping the order of object keys, as the schemas' authors wrote them.
  const ojson body = ojson::parse(body_text, nullptr, false);
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (absl::Status s = serving::CheckTools(*tools); !s.ok()) return s;
    if (!tools->empty()) tc.tools = *tools;
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c != "auto" && c != "none" && c != "required") {
        return InvalidParam("tool_choice",
                            "'tool_choice' must be 'auto', 'none', 'required' or "
                            "{\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      tc.choice = c;
    } else if (choice->is_object()) {
      auto type = choice->find("type");
      auto fn = choice->find("function");
      if (type == choice->end() || !type->is_string() || *type != "function") {
        return InvalidParam("tool_choice.type", "'tool_choice.type' must be 'function'");
      }
      if (fn == choice->end() || !fn->is_object() || !fn->contains("name") ||
          !(*fn)["name"].is_string()) {
        return InvalidParam("tool_choice.function.name",
                            "'tool_choice.function.name' must be a string");
      }
      tc.choice = "function";
      tc.function = (*fn)["name"].get<std::string>();
    } else {
      return InvalidParam("tool_choice",
                          "'tool_choice' must be 'auto', 'none', 'required' or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (absl::Status s = serving::CheckToolChoice(tc); !s.ok()) return s;
  }
  auto kwargs = body.find("chat_template_kwargs");
  if (kwargs != body.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) {
      return InvalidParam("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    tc.template_kwargs = *kwargs;
  }
  return absl::OkStatus();
}

// The request's name for a field serving's checks name: completions call top_logprobs
// `logprobs`, chat may send max_tokens as `max_completion_tokens`, and a lone stop string is
// `stop`.
std::string ParamName(const std::string& field, const json& body, Endpoint endpoint) {
  if (field == "top_logprobs" && endpoint == Endpoint::kCompletions) return "logprobs";
  auto newer = body.find("max_completion_tokens");
  if (field == "max_tokens" && endpoint == Endpoint::kChatCompletions && newer != body.end() &&
      !newer->is_null()) {
    return "max_completion_tokens";
  }
  auto stop = body.find("stop");
  if (absl::StartsWith(field, "stop[") && stop != body.end() && stop->is_string()) return "stop";
  return field;
}

// serving's checks of what generation uses (the ranges of the sampling parameters,
// top_logprobs, the stop strings), each error naming the field as this request spelled it.
// Then the empty stop strings, which never match, are dropped.
absl::Status ValidateGenerationOptions(const json& body, CompletionParams* params) {
  serving::GenerateRequest request;
  request.sampling = params->sampling;
  request.max_tokens = params->max_tokens;
  request.stop = params->stop;
  request.logprobs = params->logprobs;
  request.top_logprobs = params->top_logprobs;
  absl::Status s = serving::ValidateRequestOptions(request, /*n_vocab=*/0);
  if (!s.ok()) {
    const std::string field = serving::FieldOf(s);
    const std::string param = ParamName(field, body, params->endpoint);
    if (param == field) return s;
    absl::string_view message = s.message();
    if (absl::StartsWith(message, field)) message.remove_prefix(field.size());
    return InvalidParam(param, absl::StrCat(param, message));
  }
  params->stop.erase(std::remove(params->stop.begin(), params->stop.end(), std::string()),
                     params->stop.end());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionParams> ParseCompletionRequest(const std::string& body_text,
                                                        Endpoint endpoint) {
  const json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return absl::InvalidArgumentError(
        "We could not parse the JSON body of your request. The body must be a JSON object "
        "(see https://platform.openai.com/docs/api-reference).");
  }
  CompletionParams params;
  params.endpoint = endpoint;
  absl::Status s = ReadString(body, "model", &params.model);
  if (s.ok()) s = serving::ValidateModelName(params.model);
  if (s.ok()) {
    s = endpoint == Endpoint::kChatCompletions ? ReadMessages(body, &params)
                                               : ReadPrompt(body, &params);
  }
  if (s.ok()) s = ReadSampling(body, &params);
  if (s.ok()) s = ReadLimits(body, &params);
  if (s.ok()) s = ReadStop(body, &params.stop);
  if (s.ok()) s = ReadLogprobs(body, &params);
  if (s.ok()) s = ReadBool(body, "ignore_eos", &params.ignore_eos);
  if (s.ok()) s = ReadString(body, "user", &params.user);
  if (s.ok()) s = ReadCacheSalt(body, &params.cache_salt);
  if (s.ok()) s = ReadStreaming(body, &params);
  if (s.ok() && endpoint == Endpoint::kCompletions) {
    // Tessera's own: special-token strings in `prompt` become special tokens.
    s = ReadBool(body, "parse_special_tokens", &params.parse_special_tokens);
  }
  if (s.ok() && endpoint == Endpoint::kCompletions) {
    bool echo = false;
    s = ReadBool(body, "echo", &echo);
    if (s.ok() && echo) s = InvalidParam("echo", "'echo' is not supported");
    int64_t best_of = 1;
    if (s.ok()) s = ReadInt(body, "best_of", 1, kMaxChoices, &best_of);
    if (s.ok() && best_of != 1 && best_of != params.n) {
      s = InvalidParam("best_of", "'best_of' other than 'n' is not supported");
    }
  }
  if (s.ok()) s = ValidateGenerationOptions(body, &params);
  if (s.ok()) s = ReadStructuredOutput(body_text, body, &params);
  if (s.ok() && endpoint == Endpoint::kChatCompletions) s = ReadTools(body_text, body, &params);
  if (!s.ok()) return s;
  return params;
}

}  // namespace tessera::http
