#include "common/chat/template.h"

#include <algorithm>
#include <ctime>

#include "absl/status/status.h"
#include "common/chat/ast.h"
#include "common/chat/interpreter.h"
#include "common/chat/json_dump.h"
#include "common/chat/parser.h"
#include "common/chat/template_error.h"

namespace tessera::chat {

struct ChatTemplate::Program {
  StmtList statements;
};

namespace {

absl::Status LineError(const TemplateError& e) {
  if (e.line() > 0) {
    return absl::InvalidArgumentError("chat template line " + std::to_string(e.line()) + ": " +
                                      e.what());
  }
  return absl::InvalidArgumentError(std::string("chat template: ") + e.what());
}

std::tm LocalTimeNow() {
  std::time_t t = std::time(nullptr);
  std::tm now{};
  localtime_r(&t, &now);
  return now;
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::Parse(std::string_view source) {
  try {
    auto program = std::make_shared<Program>();
    program->statements = ParseTemplate(source);
    CheckNames(program->statements);
    return ChatTemplate(std::move(program));
  } catch (const TemplateError& e) {
    return LineError(e);
  }
}

absl::StatusOr<RenderedPrompt> ChatTemplate::RenderWith(
    const nlohmann::ordered_json& variables, const std::tm& now,
    const std::vector<std::string>* request_keys, size_t max_output_bytes) const {
  if (!variables.is_object()) {
    return absl::InvalidArgumentError("chat template variables: expected a JSON object, got " +
                                      std::string(variables.type_name()));
  }
  try {
    ValueDict vars;
    vars.Reserve(variables.size());
    for (auto it = variables.begin(); it != variables.end(); ++it) {
      const bool request_data =
          request_keys != nullptr &&
          std::find(request_keys->begin(), request_keys->end(), it.key()) != request_keys->end();
      vars.Append(it.key(), FromJson(it.value(), request_data));
    }
    TrackedText out = Execute(program_->statements, vars, now, max_output_bytes);
    RenderedPrompt prompt;
    prompt.request_spans = out.TakeSpans();
    prompt.text = out.TakeText();
    return prompt;
  } catch (const RaisedException& e) {
    return absl::FailedPreconditionError(e.what());
  } catch (const OutputLimitError& e) {
    return absl::OutOfRangeError(e.what());
  } catch (const TemplateError& e) {
    return LineError(e);
  }
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& variables,
                                                 const std::tm& now) const {
  absl::StatusOr<RenderedPrompt> prompt = RenderWith(variables, now, nullptr, 0);
  if (!prompt.ok()) return prompt.status();
  return std::move(prompt->text);
}

absl::StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& variables) const {
  return Render(variables, LocalTimeNow());
}

absl::StatusOr<RenderedPrompt> ChatTemplate::RenderTracked(
    const nlohmann::ordered_json& variables, const std::tm& now,
    const std::vector<std::string>& request_keys, size_t max_output_bytes) const {
  return RenderWith(variables, now, &request_keys, max_output_bytes);
}

absl::StatusOr<RenderedPrompt> ChatTemplate::RenderTracked(
    const nlohmann::ordered_json& variables, const std::vector<std::string>& request_keys,
    size_t max_output_bytes) const {
  return RenderTracked(variables, LocalTimeNow(), request_keys, max_output_bytes);
}

void AddHuggingFaceDefaults(nlohmann::ordered_json* variables) {
  nlohmann::ordered_json& v = *variables;
  if (!v.is_object()) return;
  if (v.contains("kwargs") && v["kwargs"].is_object()) {
    nlohmann::ordered_json extra = v["kwargs"];
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      if (!v.contains(it.key())) v[it.key()] = it.value();
    }
  }
  for (const char* key : {"tools", "documents"}) {
    if (!v.contains(key)) v[key] = nullptr;
  }
  if (!v.contains("add_generation_prompt")) v["add_generation_prompt"] = false;
}

std::tm MakeTime(int year, int month, int day, int hour, int minute, int second) {
  std::tm t{};
  t.tm_year = year - 1900;
  t.tm_mon = month - 1;
  t.tm_mday = day;
  t.tm_hour = hour;
  t.tm_min = minute;
  t.tm_sec = second;
  t.tm_isdst = 0;
  // timegm normalizes and fills in the weekday and day of the year (%A, %j).
  std::time_t secs = timegm(&t);
  gmtime_r(&secs, &t);
  return t;
}

}  // namespace tessera::chat
