#include "controller/metrics/text_format.h"

#include <charconv>
#include <cmath>

namespace tessera::metrics {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// name{a="x",b="y"[,extra="v"]} value\n
void AppendLine(std::string_view name, std::string_view suffix,
                const std::vector<std::string>& label_names,
                const std::vector<std::string>& label_values, std::string_view extra_name,
                std::string_view extra_value, double value, std::string* out) {
  out->append(name);
  out->append(suffix);
  const bool has_labels = !label_names.empty() || !extra_name.empty();
  if (has_labels) {
    out->push_back('{');
    for (size_t i = 0; i < label_names.size(); ++i) {
      if (i > 0) out->push_back(',');
      out->append(label_names[i]);
      out->append("=\"");
      AppendEscapedLabelValue(label_values[i], out);
      out->push_back('"');
    }
    if (!extra_name.empty()) {
      if (!label_names.empty()) out->push_back(',');
      out->append(extra_name);
      out->append("=\"");
      AppendEscapedLabelValue(extra_value, out);
      out->push_back('"');
    }
    out->push_back('}');
  }
  out->push_back(' ');
  AppendNumber(value, out);
  out->push_back('\n');
}

}  // namespace

bool IsValidMetricName(std::string_view name) {
  if (name.empty() || !(IsNameStart(name[0]) || name[0] == ':')) return false;
  for (char c : name) {
    if (!(IsNameStart(c) || IsDigit(c) || c == ':')) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || !IsNameStart(name[0]) || name.substr(0, 2) == "__") return false;
  for (char c : name) {
    if (!(IsNameStart(c) || IsDigit(c))) return false;
  }
  return true;
}

void AppendNumber(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("NaN");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[32];
    // Shortest representation that round-trips; its exponent form ("1e+21") is one Go
    // parses.
    const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
    out->append(buf, end);
  }
}

std::string FormatNumber(double value) {
  std::string s;
  AppendNumber(value, &s);
  return s;
}

void AppendEscapedHelp(std::string_view help, std::string* out) {
  for (char c : help) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

void AppendEscapedLabelValue(std::string_view value, std::string* out) {
  for (char c : value) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '"') {
      out->append("\\\"");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

void AppendHeader(std::string_view name, std::string_view help, std::string_view type,
                  std::string* out) {
  out->append("# HELP ");
  out->append(name);
  out->push_back(' ');
  AppendEscapedHelp(help, out);
  out->append("\n# TYPE ");
  out->append(name);
  out->push_back(' ');
  out->append(type);
  out->push_back('\n');
}

void AppendSamples(std::string_view name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Counter& counter,
                   std::string* out) {
  AppendLine(name, "", label_names, label_values, "", "", counter.Value(), out);
}

void AppendSamples(std::string_view name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Gauge& gauge,
                   std::string* out) {
  AppendLine(name, "", label_names, label_values, "", "", gauge.Value(), out);
}

void AppendSamples(std::string_view name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const CallbackGauge& gauge,
                   std::string* out) {
  if (const std::optional<double> value = gauge.Value()) {
    AppendLine(name, "", label_names, label_values, "", "", *value, out);
  }
}

void AppendSamples(std::string_view name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Histogram& histogram,
                   std::string* out) {
  const Histogram::Snapshot s = histogram.Read();
  const std::vector<double>& bounds = histogram.upper_bounds();
  std::string le;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    le.clear();
    AppendNumber(i < bounds.size() ? bounds[i] : HUGE_VAL, &le);
    AppendLine(name, "_bucket", label_names, label_values, "le", le,
               static_cast<double>(s.cumulative[i]), out);
  }
  AppendLine(name, "_sum", label_names, label_values, "", "", s.sum, out);
  AppendLine(name, "_count", label_names, label_values, "", "", static_cast<double>(s.count), out);
}

}  // namespace tessera::metrics
