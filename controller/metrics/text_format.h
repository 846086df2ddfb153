// Prometheus text exposition format 0.0.4: names, number formatting, escaping and sample
// lines. https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "controller/metrics/counter.h"
#include "controller/metrics/gauge.h"
#include "controller/metrics/histogram.h"

namespace tessera::metrics {

// The content type to serve Expose()'s text under.
inline constexpr const char* kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for Prometheus itself).
bool IsValidLabelName(std::string_view name);

// Appends `value` so that Prometheus (Go's strconv.ParseFloat) reads back the same double:
// the shortest round-trip decimal ("0.25", "1e-05", "1e+21"), or "+Inf", "-Inf", "NaN".
void AppendNumber(double value, std::string* out);
std::string FormatNumber(double value);

// HELP text: backslash -> "\\", newline -> "\n".
void AppendEscapedHelp(std::string_view help, std::string* out);
// Label values: backslash -> "\\", double quote -> "\"", newline -> "\n".
void AppendEscapedLabelValue(std::string_view value, std::string* out);

// "# HELP name help\n# TYPE name type\n".
void AppendHeader(std::string_view name, std::string_view help, std::string_view type,
                  std::string* out);

// The sample lines of one labelled child. `label_names` and `label_values` have the same
// length; label order in the output is the family's declared order (histograms add `le`
// last).
void AppendSamples(std::string_view name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Counter& counter,
                   std::string* out);
void AppendSamples(std::string_view name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Gauge& gauge,
                   std::string* out);
void AppendSamples(std::string_view name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const CallbackGauge& gauge,
                   std::string* out);
void AppendSamples(std::string_view name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Histogram& histogram,
                   std::string* out);

}  // namespace tessera::metrics
