#include "common/chat/tool_call_grammar.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grammar/gbnf_writer.h"
#include "common/grammar/json_schema.h"
#include "common/grammar/regex.h"

namespace tessera::chat {
namespace {

using Json = nlohmann::ordered_json;
using grammar::GbnfLiteral;
using grammar::GbnfRules;

// The raw forms of the string formats JSON Schema names (a subset of each: what a validator
// such as ajv-formats accepts; years from 1000, days up to 28 so that every month has them).
constexpr std::string_view kDate = "[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])";
constexpr std::string_view kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
constexpr std::string_view kUuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
constexpr std::string_view kEmail =
    "[a-z0-9_%+-]{1,16}(\\.[a-z0-9_%+-]{1,16})?@[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?"
    "\\.[a-z]{2,8}";

// A character of a raw string value: not '<' (which could begin </arg_value>), not a control
// character other than tab and newline.
constexpr char kRawChar[] = "[^<\\x00-\\x08\\x0B-\\x1F\\x7F]";

// Keywords of a string parameter that a raw GLM value can honour, and those that concern
// only the parameter's other types (a value written raw is always read back as a string).
bool RawStringKeyword(const std::string& k) {
  static const char* const kKeywords[] = {"type",
                                          "enum",
                                          "const",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "title",
                                          "description",
                                          "default",
                                          "examples",
                                          "example",
                                          "$schema",
                                          "$id",
                                          "$comment",
                                          "deprecated",
                                          "readOnly",
                                          "writeOnly",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "uniqueItems",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "multipleOf",
                                          "nullable"};
  return std::find(std::begin(kKeywords), std::end(kKeywords), k) != std::end(kKeywords);
}

// "string" is the parameter's type, or one of its types: the parser keeps the value as text.
bool IsStringTyped(const Json& schema) {
  auto type = schema.find("type");
  if (type == schema.end()) return false;
  if (type->is_string()) return *type == "string";
  if (type->is_array()) {
    return std::any_of(type->begin(), type->end(), [](const Json& t) { return t == "string"; });
  }
  return false;
}

// The body of the reasoning rule: any text up to </think>. Special tokens are not characters,
// so `.` never takes a special closing token. As text: any text that does not contain
// "</think>" (a "<" run may end it when </think> follows; a partial "</thin" followed by
// another "<" is the one spelling left out).
std::string ReasoningBody(bool close_is_special) {
  if (close_is_special) return "(.)*";
  return "([^<] | \"<\"+ ([^</] | \"/\" ([^<t] | \"t\" ([^<h] | \"h\" ([^<i] | \"i\" "
         "([^<n] | \"n\" ([^<k] | \"k\" [^<>])))))))* "
         "(\"<\"+ (\"/\" (\"t\" (\"h\" (\"i\" (\"n\" \"k\"?)?)?)?)?)?)?";
}

bool IsGbnfNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// Calls `name(begin, end)` for every rule name of GBNF `text` (definitions and references),
// skipping literals, classes, token references, repetition bounds and comments.
template <typename F>
void ForEachGbnfName(std::string_view text, F name) {
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      for (++i; i < text.size() && text[i] != close; ++i) {
        if (text[i] == '\\') ++i;
      }
      ++i;
    } else if (c == '<' || c == '{') {
      const size_t end = text.find(c == '<' ? '>' : '}', i);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (c == '#') {
      const size_t end = text.find('\n', i);
      i = end == std::string_view::npos ? text.size() : end;
    } else if (IsGbnfNameChar(c)) {
      const size_t begin = i;
      while (i < text.size() && IsGbnfNameChar(text[i])) ++i;
      name(begin, i);
    } else {
      ++i;
    }
  }
}

class Builder {
 public:
  explicit Builder(const ToolCallGrammarOptions& o) : o_(o) {}

  absl::StatusOr<std::string> Build() {
    const std::string& f = o_.format;
    if (f != "glm45" && f != "deepseek_v3" && f != "deepseek_v31" && f != "hermes" &&
        f != "llama3_json" && f != "mistral") {
      return absl::InvalidArgumentError(absl::StrCat(
          "the tool-call format '", f,
          "' has no call markup to force a call in (the model's chat template writes none "
          "Tessera knows; start tesserad with --tool-call-parser NAME to choose one)"));
    }
    if (!o_.tools.is_array() || o_.tools.empty()) {
      return absl::InvalidArgumentError("forcing a tool call needs a non-empty 'tools' list");
    }
    const std::string root = rules_.Reserve("root");
    std::vector<std::string> calls;
    for (size_t i = 0; i < o_.tools.size(); ++i) {
      const Json& fn = o_.tools[i]["function"];
      const std::string name = fn.value("name", "");
      if (!o_.function.empty() && name != o_.function) continue;
      absl::StatusOr<std::string> call = Call(i, name, fn);
      if (!call.ok()) return call.status();
      calls.push_back(*call);
    }
    if (calls.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the function '", o_.function, "' is not among the tools"));
    }
    const std::string call = rules_.Reserve("call");
    rules_.Define(call, absl::StrJoin(calls, " | "));
    const bool many = o_.parallel && f != "llama3_json";
    std::string list = call;
    if (many) {
      const std::string sep = f == "mistral"  ? "\", \""
                              : f == "hermes" ? "\"\\n\""
                              : f == "glm45"  ? "\"\\n\"?"
                                              : "";
      list = absl::StrCat(call, " (", sep, sep.empty() ? "" : " ", call, ")*");
    }
    std::string body;
    if (f == "deepseek_v31" || f == "deepseek_v3") {
      body = absl::StrCat(Marker("<｜tool▁calls▁begin｜>"), " ", list, " ",
                          Marker("<｜tool▁calls▁end｜>"));
    } else if (f == "mistral") {
      body = absl::StrCat(Marker("[TOOL_CALLS]"), " \"[\" ", list, " \"]\"");
    } else {
      body = list;
    }
    if (o_.starts_in_reasoning) {
      const std::string reasoning = rules_.Reserve("reasoning");
      rules_.Define(reasoning, ReasoningBody(SpecialId("</think>").has_value()));
      body = absl::StrCat(reasoning, " ", Marker("</think>"), " \"\\n\"? ", body);
    }
    rules_.Define(root, body);
    return rules_.Text();
  }

 private:
  std::optional<int32_t> SpecialId(std::string_view text) const {
    return o_.special_token ? o_.special_token(text) : std::nullopt;
  }

  std::string Marker(std::string_view text) const {
    if (std::optional<int32_t> id = SpecialId(text)) return absl::StrCat("<[", *id, "]>");
    return GbnfLiteral(text);
  }

  static std::string Where(size_t tool) {
    return absl::StrCat("tools[", tool, "].function.parameters");
  }

  // The JSON Schema front end's "json_schema at /x: ..." as "tools[i].function.parameters
  // at PREFIX/x: ...", where PREFIX is where the compiled schema sits in the parameters.
  static absl::Status SchemaError(size_t tool, const absl::Status& s, const std::string& prefix) {
    std::string message(s.message());
    constexpr std::string_view kAt = "json_schema at ";
    if (message.rfind(kAt, 0) == 0) {
      const size_t colon = message.find(':', kAt.size());
      std::string pointer = message.substr(kAt.size(), colon - kAt.size());
      if (pointer == "/") pointer = prefix.empty() ? "/" : "";
      message = absl::StrCat(" at ", prefix, pointer,
                             colon == std::string::npos ? "" : message.substr(colon));
    } else if (message.rfind("json_schema", 0) == 0) {
      message = message.substr(11);
    }
    return absl::InvalidArgumentError(absl::StrCat(Where(tool), message));
  }

  grammar::JsonSchemaOptions SchemaOptions() const {
    grammar::JsonSchemaOptions so;
    so.max_whitespace = o_.max_whitespace;
    return so;
  }

  // The parameters schema as an object schema ("{}" when the tool has none).
  static Json Parameters(const Json& fn) {
    auto p = fn.find("parameters");
    if (p == fn.end() || p->is_null()) {
      return Json{
          {"type", "object"}, {"properties", Json::object()}, {"additionalProperties", false}};
    }
    Json params = *p;
    if (params.is_object() && !params.contains("type")) params["type"] = "object";
    return params;
  }

  // The JSON object of a tool's arguments.
  absl::StatusOr<std::string> ArgumentsJson(size_t tool, const Json& fn) {
    const std::string name = rules_.Reserve(absl::StrCat("args-", tool));
    absl::Status s = grammar::DefineJsonSchemaRule(Parameters(fn), SchemaOptions(), name, rules_);
    if (!s.ok()) return SchemaError(tool, s, "");
    return name;
  }

  absl::StatusOr<std::string> Call(size_t tool, const std::string& name, const Json& fn) {
    const std::string& f = o_.format;
    if (f == "glm45") return GlmCall(tool, name, fn);
    absl::StatusOr<std::string> args = ArgumentsJson(tool, fn);
    if (!args.ok()) return args.status();
    const std::string quoted = GbnfLiteral(Json(name).dump());
    if (f == "deepseek_v3") {
      return rules_.Helper(
          absl::StrCat("call-", tool),
          absl::StrCat(Marker("<｜tool▁call▁begin｜>"), " \"function\" ", Marker("<｜tool▁sep｜>"),
                       " ", GbnfLiteral(name + "\n```json\n"), " ", *args, " ",
                       GbnfLiteral("\n```"), " ", Marker("<｜tool▁call▁end｜>")));
    }
    if (f == "deepseek_v31") {
      return rules_.Helper(
          absl::StrCat("call-", tool),
          absl::StrCat(Marker("<｜tool▁call▁begin｜>"), " ", GbnfLiteral(name), " ",
                       Marker("<｜tool▁sep｜>"), " ", *args, " ", Marker("<｜tool▁call▁end｜>")));
    }
    // {"name": "...", "arguments": {...}}: a space after ':' and ',' or none.
    const char* key = f == "llama3_json" ? "parameters" : "arguments";
    std::string envelope =
        absl::StrCat("\"{\\\"name\\\":\" \" \"? ", quoted, " \",\" \" \"? ",
                     GbnfLiteral(absl::StrCat("\"", key, "\":")), " \" \"? ", *args);
    if (f == "mistral") {
      absl::StrAppend(&envelope, " \",\" \" \"? \"\\\"id\\\":\" \" \"? \"\\\"\" [a-zA-Z0-9]{9} ",
                      "\"\\\"\"");
    }
    absl::StrAppend(&envelope, " \"}\"");
    if (f == "hermes") {
      envelope = absl::StrCat(Marker("<tool_call>"), " \"\\n\" ", envelope, " \"\\n\" ",
                              Marker("</tool_call>"));
    }
    return rules_.Helper(absl::StrCat("call-", tool), envelope);
  }

  // GLM: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>…</tool_call>.
  absl::StatusOr<std::string> GlmCall(size_t tool, const std::string& name, const Json& fn) {
    const Json params = Parameters(fn);
    const std::string where = Where(tool);
    if (!params.is_object() || params.value("type", Json("object")) != "object") {
      return absl::InvalidArgumentError(
          absl::StrCat(where,
                       ": GLM tool calls write named arguments; 'parameters' must be "
                       "an object schema"));
    }
    for (const char* k : {"anyOf", "oneOf", "allOf", "$ref", "not", "if"}) {
      if (params.contains(k)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": '", k, "' at the top of a GLM tool's parameters cannot be forced"));
      }
    }
    const Json props = params.value("properties", Json::object());
    std::vector<std::string> required;
    if (auto r = params.find("required"); r != params.end() && r->is_array()) {
      for (const Json& n : *r) {
        if (!n.is_string()) continue;
        if (!props.contains(n.get<std::string>())) {
          return absl::InvalidArgumentError(absl::StrCat(where, ": required parameter '",
                                                         n.get<std::string>(),
                                                         "' has no schema in 'properties'"));
        }
        required.push_back(n.get<std::string>());
      }
    }
    std::string body = absl::StrCat(Marker("<tool_call>"), " ", GbnfLiteral(name), " \"\\n\"?");
    for (const auto& [key, schema] : props.items()) {
      absl::StatusOr<std::string> value =
          GlmValue(tool, key, schema, params, absl::StrCat("/properties/", key));
      if (!value.ok()) return value.status();
      std::string pair = absl::StrCat(Marker("<arg_key>"), " ", GbnfLiteral(key), " ",
                                      Marker("</arg_key>"), " \"\\n\"? ", Marker("<arg_value>"),
                                      " ", *value, " ", Marker("</arg_value>"), " \"\\n\"?");
      const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
      absl::StrAppend(&body, " (", pair, ")", is_required ? "" : "?");
    }
    absl::StrAppend(&body, " ", Marker("</tool_call>"));
    return rules_.Helper(absl::StrCat("call-", tool), body);
  }

  // One GLM argument value: raw text for a string parameter, else JSON of its schema.
  absl::StatusOr<std::string> GlmValue(size_t tool, const std::string& key, const Json& schema,
                                       const Json& params, const std::string& pointer) {
    const std::string rule = rules_.Reserve(absl::StrCat("arg-", tool, "-", key));
    if (schema.is_object() && IsStringTyped(schema)) {
      absl::Status s = RawString(schema, rule, absl::StrCat(Where(tool), " at ", pointer));
      if (!s.ok()) return s;
      return rule;
    }
    // JSON of the property's schema; its $refs into the parameters' $defs / definitions
    // resolve against a copy of those beside it.
    Json doc = schema;
    if (doc.is_object()) {
      for (const char* defs : {"$defs", "definitions"}) {
        if (params.contains(defs) && !doc.contains(defs)) doc[defs] = params[defs];
      }
    }
    absl::Status s = grammar::DefineJsonSchemaRule(doc, SchemaOptions(), rule, rules_);
    if (!s.ok()) return SchemaError(tool, s, pointer);
    return rule;
  }

  // A string value written raw (as GLM's template writes strings): text without '<'.
  absl::Status RawString(const Json& schema, const std::string& rule, const std::string& where) {
    for (const auto& [k, v] : schema.items()) {
      if (!RawStringKeyword(k)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": '", k, "' cannot be forced in a GLM string argument (written raw)"));
      }
    }
    // Its string values (const, else enum): a value of another type is never read back.
    std::vector<std::string> values;
    const char* listed = schema.contains("const") ? "const" : schema.contains("enum") ? "enum" : "";
    if (*listed != '\0') {
      const Json& v = schema[listed];
      const Json list = std::string(listed) == "const" ? Json::array({v}) : v;
      if (!list.is_array()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": 'enum' must be a list"));
      }
      for (const Json& item : list) {
        if (item.is_string()) values.push_back(GbnfLiteral(item.get<std::string>()));
      }
      if (values.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": '", listed, "' has no string value to write"));
      }
    }
    if (!values.empty()) {
      rules_.Define(rule, absl::StrJoin(values, " | "));
      return absl::OkStatus();
    }
    const bool bounded = schema.contains("minLength") || schema.contains("maxLength");
    std::string pattern;
    if (auto p = schema.find("pattern"); p != schema.end()) {
      if (!p->is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": 'pattern' must be a string"));
      }
      pattern = SearchPattern(p->get<std::string>());
    }
    if (auto f = schema.find("format"); f != schema.end() && f->is_string()) {
      const std::string format = f->get<std::string>();
      std::string re;
      if (format == "date") re = kDate;
      if (format == "time") re = kTime;
      if (format == "date-time") re = std::string(kDate) + "T" + std::string(kTime);
      if (format == "uuid") re = kUuid;
      if (format == "email") re = kEmail;
      if (re.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": unsupported format '", format, "'"));
      }
      if (!pattern.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": 'pattern' and 'format' together cannot be forced"));
      }
      pattern = re;
    }
    if (!pattern.empty()) {
      if (bounded) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": a length bound with a pattern or format cannot be forced"));
      }
      absl::Status s =
          grammar::DefineRegexRule(pattern, grammar::RegexTarget::kWholeText, rule, "", rules_);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
      return absl::OkStatus();
    }
    auto bound = [&](const char* k, uint64_t fallback) -> absl::StatusOr<uint64_t> {
      auto it = schema.find(k);
      if (it == schema.end()) return fallback;
      if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 100000) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": '", k, "' must be an integer from 0 to 100000"));
      }
      return it->get<uint64_t>();
    };
    absl::StatusOr<uint64_t> lo = bound("minLength", 0);
    if (!lo.ok()) return lo.status();
    absl::StatusOr<uint64_t> hi = bound("maxLength", UINT64_MAX);
    if (!hi.ok()) return hi.status();
    if (*hi < *lo) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": 'maxLength' is below 'minLength'"));
    }
    if (*hi == UINT64_MAX) {
      rules_.Define(
          rule, *lo == 0 ? absl::StrCat(kRawChar, "*") : absl::StrCat(kRawChar, "{", *lo, ",}"));
    } else {
      rules_.AddCost(*hi);
      rules_.Define(rule, absl::StrCat(kRawChar, "{", *lo, ",", *hi, "}"));
    }
    return absl::OkStatus();
  }

  // JSON Schema's pattern searches the value; as a whole-text regex it gets any text around
  // it unless anchored.
  static std::string SearchPattern(const std::string& p) {
    std::string core = p;
    const bool start = !core.empty() && core.front() == '^';
    if (start) core.erase(0, 1);
    bool end = !core.empty() && core.back() == '$';
    if (end) {
      size_t slashes = 0;
      for (size_t i = core.size() - 1; i > 0 && core[i - 1] == '\\'; --i) ++slashes;
      end = slashes % 2 == 0;
    }
    if (end) core.pop_back();
    const std::string any = absl::StrCat(kRawChar, "*");
    return absl::StrCat(start ? "" : any, "(?:", core, ")", end ? "" : any);
  }

  const ToolCallGrammarOptions& o_;
  GbnfRules rules_;
};

}  // namespace

absl::StatusOr<std::string> ToolCallGbnf(const ToolCallGrammarOptions& options) {
  return Builder(options).Build();
}

std::string GbnfAfterReasoning(
    std::string_view gbnf,
    const std::function<std::optional<int32_t>(std::string_view text)>& special_token) {
  std::set<std::string, std::less<>> names;
  ForEachGbnfName(gbnf, [&](size_t b, size_t e) { names.emplace(gbnf.substr(b, e - b)); });
  auto fresh = [&](std::string base) {
    std::string name = base;
    for (int n = 2; names.count(name) != 0; ++n) name = absl::StrCat(base, "-", n);
    names.insert(name);
    return name;
  };
  const std::string answer = fresh("answer-root");
  const std::string reasoning = fresh("reasoning");
  // The grammar with its start rule renamed.
  std::string renamed;
  size_t copied = 0;
  ForEachGbnfName(gbnf, [&](size_t b, size_t e) {
    if (gbnf.substr(b, e - b) != "root") return;
    renamed.append(gbnf.substr(copied, b - copied));
    renamed.append(answer);
    copied = e;
  });
  renamed.append(gbnf.substr(copied));
  const std::optional<int32_t> close = special_token ? special_token("</think>") : std::nullopt;
  const std::string marker = close ? absl::StrCat("<[", *close, "]>") : GbnfLiteral("</think>");
  return absl::StrCat("root ::= ", reasoning, " ", marker, " \"\\n\"? ", answer, "\n", reasoning,
                      " ::= ", ReasoningBody(close.has_value()), "\n", renamed, "\n");
}

}  // namespace tessera::chat
