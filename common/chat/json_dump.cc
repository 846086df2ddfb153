#include "common/chat/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/chat/py_string.h"
#include "common/chat/taint.h"
#include "common/chat/template_error.h"

namespace tessera::chat {

Value FromJson(const nlohmann::ordered_json& j, bool request_data) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return request_data ? WholeIf(j.get<std::string>(), true) : Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e, request_data));
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict d;  // JSON object keys are unique
      d.Reserve(j.size());
      d.set_keys_tainted(request_data);
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.Append(it.key(), FromJson(it.value(), request_data));
      }
      return Value::Dict(std::move(d));
    }
    default:
      return Value::None();
  }
}

namespace {

void DumpString(const std::string& s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (char32_t cp : DecodeUtf8(s)) {
    char buf[16];
    switch (cp) {
      case '"':
        *out += "\\\"";
        continue;
      case '\\':
        *out += "\\\\";
        continue;
      case '\n':
        *out += "\\n";
        continue;
      case '\r':
        *out += "\\r";
        continue;
      case '\t':
        *out += "\\t";
        continue;
      case '\b':
        *out += "\\b";
        continue;
      case '\f':
        *out += "\\f";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        char32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      }
      *out += buf;
    } else {
      AppendUtf8(cp, out);
    }
  }
  out->push_back('"');
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
  }

  void Dump(const Value& v, int depth, std::string* out) {
    switch (v.kind()) {
      case Value::Kind::kNone:
        *out += "null";
        return;
      case Value::Kind::kBool:
        *out += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        *out += std::to_string(v.as_int());
        return;
      case Value::Kind::kFloat: {
        double d = v.as_double();
        if (std::isnan(d)) {
          *out += "NaN";
        } else if (std::isinf(d)) {
          *out += d < 0 ? "-Infinity" : "Infinity";
        } else {
          *out += FloatRepr(d);
        }
        return;
      }
      case Value::Kind::kString:
        DumpString(v.as_string(), o_.ensure_ascii, out);
        return;
      case Value::Kind::kList: {
        if (v.list().empty()) {
          *out += "[]";
          return;
        }
        out->push_back('[');
        bool first = true;
        for (const Value& item : v.list()) {
          Separator(first, depth + 1, out);
          first = false;
          Dump(item, depth + 1, out);
        }
        Close(depth, out);
        out->push_back(']');
        return;
      }
      case Value::Kind::kDict: {
        if (v.dict().empty()) {
          *out += "{}";
          return;
        }
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : v.dict().entries()) entries.push_back(&e);
        if (o_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](auto* a, auto* b) { return a->first < b->first; });
        }
        out->push_back('{');
        bool first = true;
        for (const auto* e : entries) {
          Separator(first, depth + 1, out);
          first = false;
          DumpString(e->first, o_.ensure_ascii, out);
          *out += o_.key_separator;
          Dump(e->second, depth + 1, out);
        }
        Close(depth, out);
        out->push_back('}');
        return;
      }
      default:
        throw TemplateError("TypeError: Object of type " + TypeName(v) +
                            " is not JSON serializable");
    }
  }

 private:
  void Separator(bool first, int depth, std::string* out) {
    if (!first) *out += item_sep_;
    if (o_.indent) {
      out->push_back('\n');
      for (int i = 0; i < depth; ++i) *out += *o_.indent;
    }
  }
  void Close(int depth, std::string* out) {
    if (o_.indent) {
      out->push_back('\n');
      for (int i = 0; i < depth; ++i) *out += *o_.indent;
    }
  }

  const JsonDumpOptions& o_;
  std::string item_sep_;
};

}  // namespace

std::string JsonDumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Dumper(options).Dump(v, 0, &out);
  return out;
}

}  // namespace tessera::chat
