#include "common/chat/tool_calls.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/status/status.h"

namespace tessera::chat {
namespace {

using Json = nlohmann::ordered_json;
using tool_calls_internal::JsonScan;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";
constexpr std::string_view kArgKeyOpen = "<arg_key>";
constexpr std::string_view kArgKeyClose = "</arg_key>";
constexpr std::string_view kArgValueOpen = "<arg_value>";
constexpr std::string_view kArgValueClose = "</arg_value>";
constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
constexpr std::string_view kDeepSeekV3Json = "```json";
constexpr std::string_view kDeepSeekV3Type = "function";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";

constexpr std::string_view kWhitespace = " \t\r\n";

// A marker that may appear in content: it starts a call (with the marker that ends it; an
// empty end means the format finds the end itself), or is dropped (DeepSeek's wrapper around
// its list of calls).
struct Marker {
  std::string_view start;
  std::string_view end;
  bool drop = false;
  bool hold_all = false;  // the call runs to the end of the output (Llama's python_tag)
};

std::vector<Marker> ContentMarkers(const std::string& format) {
  if (format == "glm45" || format == "hermes") return {{kToolCallOpen, kToolCallClose}};
  if (format == "deepseek_v31" || format == "deepseek_v3") {
    return {{kDeepSeekCallsBegin, "", true},
            {kDeepSeekCallsEnd, "", true},
            {kDeepSeekCallBegin, kDeepSeekCallEnd}};
  }
  if (format == "mistral") return {{kMistralCalls, ""}};
  if (format == "llama3_json") return {{kPythonTag, "", false, true}};
  return {};
}

std::string_view Trim(std::string_view s) {
  size_t b = s.find_first_not_of(kWhitespace);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(kWhitespace);
  return s.substr(b, e - b + 1);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// The earliest position q such that s[q:] is a proper prefix of one of `markers`, i.e. text
// from q on could still become a marker when more text arrives; s.size() when none.
size_t HoldFrom(std::string_view s, const std::vector<std::string_view>& markers) {
  size_t longest = 0;
  for (std::string_view m : markers) longest = std::max(longest, m.size());
  size_t first = s.size() >= longest ? s.size() - longest + 1 : 0;
  for (size_t q = first; q < s.size(); ++q) {
    std::string_view tail = s.substr(q);
    for (std::string_view m : markers) {
      if (m.size() > tail.size() && StartsWith(m, tail)) return q;
    }
  }
  return s.size();
}

// Moves `q` back so that s[0:q] does not end inside a UTF-8 sequence (a streamed delta must
// be valid UTF-8 on its own: it is written into JSON).
size_t Utf8SafeEnd(std::string_view s, size_t q) {
  size_t i = q;
  int continuation = 0;
  while (i > 0 && continuation < 3 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++continuation;
  }
  if (i == 0) return q;
  unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  if (need > q - (i - 1)) return i - 1;
  return q;
}

// Serialized arguments; invalid UTF-8 (which the parsers never produce from JSON, but a
// GLM string value may carry) is replaced rather than thrown on.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::optional<Json> ParseJson(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Arguments as models write them: an object, or a string holding one; absent means none.
std::optional<std::string> ArgumentsOf(const Json& call, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    auto it = call.find(key);
    if (it == call.end()) continue;
    if (it->is_object()) return Dump(*it);
    if (it->is_string()) {
      auto inner = ParseJson(it->get<std::string>());
      if (inner && inner->is_object()) return Dump(*inner);
    }
    return std::nullopt;
  }
  return "{}";
}

struct ParsedCall {
  std::string name;
  std::string arguments;
  std::string id;  // the model's own id, when the format carries one
};

// {"name": …, "arguments"/"parameters": {…}} (Hermes, Llama 3.1, Mistral's list items).
std::optional<ParsedCall> ParseJsonCall(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) {
    return std::nullopt;
  }
  auto args = ArgumentsOf(j, {"arguments", "parameters"});
  if (!args) return std::nullopt;
  ParsedCall call{name->get<std::string>(), *args, ""};
  auto id = j.find("id");
  if (id != j.end() && id->is_string()) call.id = id->get<std::string>();
  return call;
}

// The JSON schema type(s) of parameter `key` of tool `name`, from an OpenAI tools array.
std::vector<std::string> ParameterTypes(const Json& tools, const std::string& name,
                                        const std::string& key) {
  std::vector<std::string> types;
  if (!tools.is_array()) return types;
  for (const Json& tool : tools) {
    if (!tool.is_object()) continue;
    const Json* fn = &tool;
    auto f = tool.find("function");
    if (f != tool.end() && f->is_object()) fn = &*f;
    auto n = fn->find("name");
    if (n == fn->end() || !n->is_string() || n->get<std::string>() != name) continue;
    auto params = fn->find("parameters");
    if (params == fn->end() || !params->is_object()) return types;
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return types;
    auto prop = props->find(key);
    if (prop == props->end() || !prop->is_object()) return types;
    auto type = prop->find("type");
    if (type == prop->end()) return types;
    if (type->is_string()) types.push_back(type->get<std::string>());
    if (type->is_array()) {
      for (const Json& t : *type) {
        if (t.is_string()) types.push_back(t.get<std::string>());
      }
    }
    return types;
  }
  return types;
}

// GLM's <arg_key>k</arg_key><arg_value>v</arg_value> pairs at the start of `rest`, in order
// (whitespace between them, as GLM-4.5/4.6 write newlines and GLM-4.7 none), each value typed
// by the tool's schema: the template writes string values raw and others as JSON. `complete`
// is false when the text stops inside a pair or goes on with anything else.
struct GlmArgs {
  std::vector<std::pair<std::string, Json>> pairs;
  bool complete = true;
};

GlmArgs ReadGlmArgs(std::string_view rest, const std::string& name, const Json& tools) {
  GlmArgs out;
  while (true) {
    size_t at = rest.find_first_not_of(kWhitespace);
    if (at == std::string_view::npos) return out;
    rest = rest.substr(at);
    out.complete = false;
    if (!StartsWith(rest, kArgKeyOpen)) return out;
    rest.remove_prefix(kArgKeyOpen.size());
    size_t key_end = rest.find(kArgKeyClose);
    if (key_end == std::string_view::npos) return out;
    std::string key(Trim(rest.substr(0, key_end)));
    rest.remove_prefix(key_end + kArgKeyClose.size());
    at = rest.find_first_not_of(kWhitespace);
    if (at == std::string_view::npos) return out;
    rest = rest.substr(at);
    if (!StartsWith(rest, kArgValueOpen)) return out;
    rest.remove_prefix(kArgValueOpen.size());
    size_t value_end = rest.find(kArgValueClose);
    if (value_end == std::string_view::npos) return out;
    std::string_view value = rest.substr(0, value_end);
    rest.remove_prefix(value_end + kArgValueClose.size());

    std::vector<std::string> types = ParameterTypes(tools, name, key);
    bool is_string = std::find(types.begin(), types.end(), "string") != types.end();
    std::optional<Json> typed;
    // A parameter without a schema type is read as JSON too (numbers, booleans, objects),
    // as vLLM's glm45 parser does; anything that does not parse stays a string.
    if (!is_string) typed = ParseJson(value);
    out.pairs.emplace_back(std::move(key), typed ? *typed : Json(std::string(value)));
    out.complete = true;
  }
}

// GLM: name, then the argument pairs.
std::optional<ParsedCall> ParseGlmCall(std::string_view body, const Json& tools) {
  size_t name_end = std::min(body.find('\n'), body.find(kArgKeyOpen));
  std::string name(Trim(body.substr(0, name_end)));
  if (name.empty() || name.find_first_of("<>{}\"") != std::string::npos) return std::nullopt;
  GlmArgs read =
      ReadGlmArgs(name_end == std::string_view::npos ? "" : body.substr(name_end), name, tools);
  if (!read.complete) return std::nullopt;
  Json args = Json::object();
  for (auto& [key, value] : read.pairs) args[key] = std::move(value);
  return ParsedCall{name, Dump(args), ""};
}

// DeepSeek-V3.1: name<｜tool▁sep｜>{json}
std::optional<ParsedCall> ParseDeepSeekCall(std::string_view body) {
  size_t sep = body.find(kDeepSeekSep);
  if (sep == std::string_view::npos) return std::nullopt;
  std::string name(Trim(body.substr(0, sep)));
  if (name.empty()) return std::nullopt;
  auto args = ParseJson(body.substr(sep + kDeepSeekSep.size()));
  if (!args || !args->is_object()) return std::nullopt;
  return ParsedCall{name, Dump(*args), ""};
}

// DeepSeek-V3: function<｜tool▁sep｜>name\n```json\n{json}\n```
std::optional<ParsedCall> ParseDeepSeekV3Call(std::string_view body) {
  size_t sep = body.find(kDeepSeekSep);
  if (sep == std::string_view::npos || Trim(body.substr(0, sep)) != kDeepSeekV3Type) {
    return std::nullopt;
  }
  std::string_view rest = body.substr(sep + kDeepSeekSep.size());
  size_t fence = rest.find(kDeepSeekV3Json);
  if (fence == std::string_view::npos) return std::nullopt;
  std::string name(Trim(rest.substr(0, fence)));
  std::string_view json = Trim(rest.substr(fence + kDeepSeekV3Json.size()));
  if (name.empty() || json.size() < 3 || json.substr(json.size() - 3) != "```") {
    return std::nullopt;
  }
  auto args = ParseJson(json.substr(0, json.size() - 3));
  if (!args || !args->is_object()) return std::nullopt;
  return ParsedCall{name, Dump(*args), ""};
}

// Where the JSON array or object starting at s[0] ends (the index of its closing bracket), or
// npos when it is not complete yet. Strings are skipped so brackets inside them do not count.
// The scan resumes where the last one stopped, so a call streamed in many pieces is read once.
size_t JsonArrayEnd(std::string_view s, JsonScan* scan) {
  for (; scan->pos < s.size(); ++scan->pos) {
    char c = s[scan->pos];
    if (scan->in_string) {
      if (scan->escape) {
        scan->escape = false;
      } else if (c == '\\') {
        scan->escape = true;
      } else if (c == '"') {
        scan->in_string = false;
      }
      continue;
    }
    if (c == '"') {
      scan->in_string = true;
    } else if (c == '[' || c == '{') {
      ++scan->depth;
    } else if (c == ']' || c == '}') {
      if (--scan->depth == 0) return scan->pos;
    }
  }
  return std::string_view::npos;
}

// True when `body` starts (after whitespace) a JSON object and ends inside one of its
// strings: a marker right after it is string text, not markup. (An object left open outside
// a string is malformed, and its call ends at the marker.)
bool EndsInsideJsonString(std::string_view body) {
  size_t i = body.find_first_not_of(kWhitespace);
  if (i == std::string_view::npos || body[i] != '{') return false;
  JsonScan scan;
  return JsonArrayEnd(body.substr(i), &scan) == std::string_view::npos && scan.in_string;
}

}  // namespace

// A call read so far, for streaming its arguments: the name (known once its terminator is
// read) and the arguments text it determines (complete when `closed`). Each later read of
// the same call extends the text (appends only). nullopt until the name is known, or when
// the text does not have the shape a grammar writes (then the call is sent whole).
struct PartialCall {
  std::string name;
  std::string arguments;
};

// GLM: the arguments as a JSON object built one complete <arg_key>/<arg_value> pair at a time.
std::optional<PartialCall> PartialGlmCall(std::string_view body, bool closed, const Json& tools) {
  size_t name_end = std::min(body.find('\n'), body.find(kArgKeyOpen));
  if (name_end == std::string_view::npos && !closed) return std::nullopt;
  PartialCall call{std::string(Trim(body.substr(0, name_end))), "{"};
  if (call.name.empty()) return std::nullopt;
  GlmArgs read = ReadGlmArgs(name_end == std::string_view::npos ? "" : body.substr(name_end),
                             call.name, tools);
  for (size_t i = 0; i < read.pairs.size(); ++i) {
    call.arguments += i == 0 ? "" : ",";
    call.arguments += Dump(Json(read.pairs[i].first)) + ":" + Dump(read.pairs[i].second);
  }
  if (closed) call.arguments += "}";
  return call;
}

// {"name": "...", "arguments"/"parameters": ARGS} as the grammar writes it (name first): the
// arguments' JSON text as read.
std::optional<PartialCall> PartialJsonCall(std::string_view body, bool closed) {
  size_t i = body.find_first_not_of(kWhitespace);
  auto skip = [&] {
    while (i < body.size() && kWhitespace.find(body[i]) != std::string_view::npos) ++i;
  };
  auto take = [&](std::string_view token) {
    skip();
    if (i == std::string_view::npos || body.substr(i, token.size()) != token) return false;
    i += token.size();
    return true;
  };
  if (!take("{") || !take("\"name\"") || !take(":") || !take("\"")) return std::nullopt;
  size_t name_end = body.find('"', i);
  if (name_end == std::string_view::npos) return std::nullopt;
  PartialCall call{std::string(body.substr(i, name_end - i)), ""};
  i = name_end + 1;
  if (call.name.empty() || call.name.find('\\') != std::string::npos || !take(",")) {
    return std::nullopt;
  }
  if (!take("\"arguments\"") && !take("\"parameters\"")) return std::nullopt;
  if (!take(":")) return std::nullopt;
  skip();
  if (i >= body.size() || body[i] != '{') return std::nullopt;
  JsonScan scan;
  std::string_view args = body.substr(i);
  size_t end = JsonArrayEnd(args, &scan);
  if (end == std::string_view::npos && closed) return std::nullopt;
  call.arguments.assign(
      args.substr(0, end == std::string_view::npos ? Utf8SafeEnd(args, args.size()) : end + 1));
  return call;
}

// DeepSeek-V3.1: name<｜tool▁sep｜>{json}, the JSON text as read.
std::optional<PartialCall> PartialDeepSeekCall(std::string_view body, bool closed) {
  size_t sep = body.find(kDeepSeekSep);
  if (sep == std::string_view::npos) return std::nullopt;
  PartialCall call{std::string(Trim(body.substr(0, sep))), ""};
  if (call.name.empty()) return std::nullopt;
  std::string_view args = body.substr(sep + kDeepSeekSep.size());
  if (closed) {
    args = Trim(args);
  } else {
    size_t lead = args.find_first_not_of(kWhitespace);
    args = lead == std::string_view::npos ? "" : args.substr(lead);
    args = args.substr(0, Utf8SafeEnd(args, args.size()));
  }
  call.arguments.assign(args);
  return call;
}

const std::vector<std::string>& ToolCallFormats() {
  static const std::vector<std::string> formats = {
      "glm45", "deepseek_v3", "deepseek_v31", "hermes", "llama3_json", "mistral", "none"};
  return formats;
}

std::string DetectToolCallFormat(std::string_view source) {
  auto has = [&](std::string_view s) { return source.find(s) != std::string_view::npos; };
  // Most specific first: GLM also writes <tool_call>, so its <arg_key> decides before Hermes.
  if (has(kArgKeyOpen) && has(kToolCallOpen)) return "glm45";
  // DeepSeek-V3 writes "function<｜tool▁sep｜>name" and the arguments in a ```json block.
  if ((has(kDeepSeekCallsBegin) || has(kDeepSeekCallBegin)) && has(kDeepSeekV3Json)) {
    return "deepseek_v3";
  }
  if (has(kDeepSeekCallsBegin) || has(kDeepSeekCallBegin)) return "deepseek_v31";
  if (has(kMistralCalls)) return "mistral";
  if (has(kToolCallOpen)) return "hermes";
  if (has("<|start_header_id|>") && (has(kPythonTag) || has("\"parameters\""))) {
    return "llama3_json";
  }
  return "none";
}

bool PromptEndsInReasoning(std::string_view prompt) {
  size_t end = prompt.find_last_not_of(kWhitespace);
  if (end == std::string_view::npos) return false;
  prompt = prompt.substr(0, end + 1);
  return prompt.size() >= kThinkOpen.size() &&
         prompt.compare(prompt.size() - kThinkOpen.size(), kThinkOpen.size(), kThinkOpen) == 0;
}

absl::StatusOr<ChatOutputParser> ChatOutputParser::Create(ChatOutputOptions options) {
  const auto& formats = ToolCallFormats();
  if (std::find(formats.begin(), formats.end(), options.format) == formats.end()) {
    return absl::InvalidArgumentError("unknown tool-call format \"" + options.format + "\"");
  }
  return ChatOutputParser(std::move(options));
}

ChatOutputParser::ChatOutputParser(ChatOutputOptions options)
    : options_(std::move(options)), rng_(std::random_device{}()) {
  if (!options_.parse_reasoning) {
    state_ = State::kContent;
  } else if (options_.starts_in_reasoning) {
    state_ = State::kReasoning;
  }
}

ChatOutputDelta ChatOutputParser::Feed(std::string_view piece) {
  ChatOutputDelta out;
  if (state_ == State::kDone) return out;
  buffer_.append(piece);
  Process(false, &out);
  return out;
}

ChatOutputDelta ChatOutputParser::Finish() {
  ChatOutputDelta out;
  if (state_ == State::kDone) return out;
  Process(true, &out);
  state_ = State::kDone;
  return out;
}

void ChatOutputParser::Process(bool final, ChatOutputDelta* out) {
  while (Step(final, out)) {
  }
}

void ChatOutputParser::Emit(Channel* channel, std::string_view text, std::string* out) {
  if (!channel->started) {
    size_t b = text.find_first_not_of(kWhitespace);
    if (b == std::string_view::npos) return;
    text.remove_prefix(b);
    channel->started = true;
  }
  size_t e = text.find_last_not_of(kWhitespace);
  if (e == std::string_view::npos) {
    channel->pending_ws.append(text);
    return;
  }
  out->append(channel->pending_ws);
  channel->pending_ws.clear();
  out->append(text.substr(0, e + 1));
  channel->pending_ws.assign(text.substr(e + 1));
}

std::string ChatOutputParser::NewId() {
  static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  // Mistral's template refuses ids other than 9 alphanumerics when the call comes back in
  // the history; the others use OpenAI's "call_" form.
  bool mistral = options_.format == "mistral";
  std::string id = mistral ? "" : "call_";
  int n = mistral ? 9 : 24;
  std::uniform_int_distribution<int> pick(0, static_cast<int>(sizeof(kAlnum)) - 2);
  for (int i = 0; i < n; ++i) id += kAlnum[pick(rng_)];
  return id;
}

void ChatOutputParser::EmitCall(std::string name, std::string arguments, std::string id,
                                ChatOutputDelta* out) {
  // Without parallel calls only the first is returned; later ones are dropped, not content.
  if (options_.max_calls > 0 && next_index_ >= options_.max_calls) return;
  ToolCallDelta d;
  d.index = next_index_++;
  d.id = id.empty() ? NewId() : std::move(id);
  d.name = std::move(name);
  d.arguments = std::move(arguments);
  out->tool_calls.push_back(std::move(d));
}

void ChatOutputParser::ResolveCall(std::string_view body, bool closed, ChatOutputDelta* out) {
  const std::string& f = options_.format;
  std::vector<ParsedCall> calls;
  std::optional<ParsedCall> one;
  if (f == "glm45") {
    one = ParseGlmCall(body, options_.tools);
  } else if (f == "deepseek_v31") {
    one = ParseDeepSeekCall(body);
  } else if (f == "deepseek_v3") {
    one = ParseDeepSeekV3Call(body);
  } else if (f == "hermes" || f == "llama3_json") {
    if (auto j = ParseJson(body)) one = ParseJsonCall(*j);
    // Only Mistral's ids come from the model; the others are always generated.
    if (one) one->id.clear();
  } else if (f == "mistral") {
    // The whole list is taken, or none of it.
    auto j = ParseJson(body);
    if (j && j->is_array()) {
      for (const Json& item : *j) {
        auto c = ParseJsonCall(item);
        if (!c) {
          calls.clear();
          break;
        }
        calls.push_back(std::move(*c));
      }
    }
  }
  if (one) calls.push_back(std::move(*one));
  const bool ok = !calls.empty();
  if (!ok) {
    // Not a call after all: the model's text, markup included, is content.
    std::string raw = call_start_;
    raw.append(body);
    if (closed) raw.append(call_end_);
    Emit(&content_, raw, &out->content);
    return;
  }
  // Whitespace written before a call (templates put newlines there) belongs to the markup.
  content_.pending_ws.clear();
  for (auto& c : calls) EmitCall(std::move(c.name), std::move(c.arguments), std::move(c.id), out);
}

bool ChatOutputParser::StreamCall(std::string_view body, bool closed, ChatOutputDelta* out) {
  const std::string& f = options_.format;
  if (!options_.stream_arguments || (f != "glm45" && f != "hermes" && f != "deepseek_v31")) {
    return false;
  }
  std::optional<PartialCall> call = f == "glm45"    ? PartialGlmCall(body, closed, options_.tools)
                                    : f == "hermes" ? PartialJsonCall(body, closed)
                                                    : PartialDeepSeekCall(body, closed);
  if (!call) return streaming_index_ >= 0;  // not started: the call is resolved whole
  // Later reads only extend the text; anything else (never from a grammar) stops the pieces.
  if (streaming_index_ >= 0 && !StartsWith(call->arguments, streamed_arguments_)) return true;
  if (streaming_index_ < 0) {
    if (options_.max_calls > 0 && next_index_ >= options_.max_calls) return true;  // dropped
    content_.pending_ws.clear();
    streaming_index_ = next_index_;
    EmitCall(std::move(call->name), call->arguments, "", out);
  } else if (call->arguments.size() > streamed_arguments_.size()) {
    ToolCallDelta d;
    d.index = streaming_index_;
    d.arguments = call->arguments.substr(streamed_arguments_.size());
    out->tool_calls.push_back(std::move(d));
  }
  streamed_arguments_ = std::move(call->arguments);
  return true;
}

bool ChatOutputParser::Step(bool final, ChatOutputDelta* out) {
  switch (state_) {
    case State::kDone:
      return false;

    case State::kStart: {
      // Reasoning is recognized only at the very start of the output (after whitespace).
      size_t i = buffer_.find_first_not_of(kWhitespace);
      if (i == std::string::npos) {
        if (!final) return false;
        state_ = State::kContent;
        return true;
      }
      std::string_view rest = std::string_view(buffer_).substr(i);
      if (StartsWith(rest, kThinkOpen)) {
        buffer_.erase(0, i + kThinkOpen.size());
        state_ = State::kReasoning;
        return true;
      }
      if (!final && StartsWith(kThinkOpen, rest)) return false;
      state_ = State::kContent;
      return true;
    }

    case State::kReasoning: {
      size_t p = buffer_.find(kThinkClose);
      if (p != std::string::npos) {
        Emit(&reasoning_, std::string_view(buffer_).substr(0, p), &out->reasoning_content);
        buffer_.erase(0, p + kThinkClose.size());
        state_ = State::kContent;
        return true;
      }
      size_t q = final ? buffer_.size() : HoldFrom(buffer_, {kThinkClose});
      if (!final) q = Utf8SafeEnd(buffer_, q);
      Emit(&reasoning_, std::string_view(buffer_).substr(0, q), &out->reasoning_content);
      buffer_.erase(0, q);
      return false;
    }

    case State::kContent: {
      std::string_view buf = buffer_;
      // Llama 3.1 writes a call as the whole message: a JSON object from the first character.
      if (options_.format == "llama3_json" && !content_.started) {
        size_t i = buf.find_first_not_of(kWhitespace);
        if (i != std::string_view::npos && buf[i] == '{') {
          buffer_.erase(0, i);
          call_start_.clear();
          call_end_.clear();
          state_ = State::kHoldAll;
          return true;
        }
        if (i == std::string_view::npos && !final) return false;
      }
      std::vector<Marker> markers = ContentMarkers(options_.format);
      size_t best = std::string_view::npos;
      const Marker* found = nullptr;
      for (const Marker& m : markers) {
        size_t p = buf.find(m.start);
        if (p < best) best = p, found = &m;
      }
      if (found != nullptr) {
        Emit(&content_, buf.substr(0, best), &out->content);
        Marker m = *found;
        buffer_.erase(0, best + m.start.size());
        if (!m.drop) {
          call_start_.assign(m.start);
          call_end_.assign(m.end);
          scan_ = JsonScan();
          state_ = m.hold_all ? State::kHoldAll : State::kCall;
        }
        return true;
      }
      size_t q = buf.size();
      if (!final) {
        std::vector<std::string_view> starts;
        for (const Marker& m : markers) starts.push_back(m.start);
        q = Utf8SafeEnd(buf, HoldFrom(buf, starts));
      }
      Emit(&content_, buf.substr(0, q), &out->content);
      buffer_.erase(0, q);
      return false;
    }

    case State::kCall: {
      std::string_view buf = buffer_;
      if (call_end_.empty()) {
        // Mistral: the call list is one JSON array, which ends where its brackets balance.
        size_t i = buf.find_first_not_of(kWhitespace);
        if (i != std::string_view::npos && buf[i] != '[') {
          Emit(&content_, call_start_, &out->content);
          state_ = State::kContent;
          return true;
        }
        size_t end = i == std::string_view::npos ? i : JsonArrayEnd(buf.substr(i), &scan_);
        if (end != std::string_view::npos) {
          size_t stop = i + end + 1;
          ResolveCall(buf.substr(0, stop), true, out);
          buffer_.erase(0, stop);
          state_ = State::kContent;
          return true;
        }
      } else {
        // Resume the search where the last one stopped (less a marker's length, which may
        // have been cut by the piece boundary): a long call streamed token by token is not
        // scanned over and over.
        size_t from = scan_.pos >= call_end_.size() ? scan_.pos - call_end_.size() + 1 : 0;
        size_t p = buf.find(call_end_, from);
        // Hermes' call is one JSON object: an end marker inside one of its strings (an
        // argument's text) is text, and the call ends at a later marker.
        while (p != std::string_view::npos && options_.format == "hermes" &&
               EndsInsideJsonString(buf.substr(0, p))) {
          p = buf.find(call_end_, p + 1);
        }
        scan_.pos = buf.size();
        if (p != std::string_view::npos) {
          if (!StreamCall(buf.substr(0, p), true, out)) ResolveCall(buf.substr(0, p), true, out);
          streaming_index_ = -1;
          streamed_arguments_.clear();
          buffer_.erase(0, p + call_end_.size());
          state_ = State::kContent;
          return true;
        }
        // What can no longer be the start of the end marker is read so far.
        if (!final) StreamCall(buf.substr(0, HoldFrom(buf, {call_end_})), false, out);
      }
      if (!final) return false;
      if (streaming_index_ >= 0) {
        // Cut inside a streamed call (max_tokens): its pieces stand, it is not content.
        streaming_index_ = -1;
        streamed_arguments_.clear();
        buffer_.clear();
        state_ = State::kContent;
        return false;
      }
      // The output ended inside a call: take it if it reads as one without its end marker.
      ResolveCall(buf, false, out);
      buffer_.clear();
      state_ = State::kContent;
      return false;
    }

    case State::kHoldAll: {
      if (!final) return false;
      ResolveCall(buffer_, false, out);
      buffer_.clear();
      state_ = State::kContent;
      return false;
    }
  }
  return false;
}

absl::StatusOr<ParsedChatOutput> ParseChatOutput(std::string_view text,
                                                 const ChatOutputOptions& options) {
  ChatOutputOptions whole = options;
  whole.stream_arguments = false;  // normalized arguments, as non-streamed responses send them
  auto parser = ChatOutputParser::Create(std::move(whole));
  if (!parser.ok()) return parser.status();
  ParsedChatOutput result;
  auto take = [&](ChatOutputDelta d) {
    result.content += d.content;
    result.reasoning_content += d.reasoning_content;
    for (ToolCallDelta& t : d.tool_calls) {
      if (t.index >= static_cast<int>(result.tool_calls.size())) {
        result.tool_calls.resize(t.index + 1);
        result.tool_calls[t.index].id = std::move(t.id);
        result.tool_calls[t.index].name = std::move(t.name);
      }
      result.tool_calls[t.index].arguments += t.arguments;
    }
  };
  take(parser->Feed(text));
  take(parser->Finish());
  return result;
}

}  // namespace tessera::chat
