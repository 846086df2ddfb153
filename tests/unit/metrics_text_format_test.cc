// controller/metrics/text_format.h against the text exposition format 0.0.4 as written in
// https://prometheus.io/docs/instrumenting/exposition_formats/ (expected strings written
// from that page, and numbers checked by parsing them back with strtod).
#include "controller/metrics/text_format.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <regex>

#include "gtest/gtest.h"

namespace tessera::metrics {
namespace {

TEST(MetricsTextFormat, SpecialValuesUseTheFormatsSpelling) {
  EXPECT_EQ(FormatNumber(HUGE_VAL), "+Inf");
  EXPECT_EQ(FormatNumber(-HUGE_VAL), "-Inf");
  EXPECT_EQ(FormatNumber(std::nan("")), "NaN");
}

TEST(MetricsTextFormat, IntegersPrintWithoutFractionOrExponent) {
  EXPECT_EQ(FormatNumber(0), "0");
  EXPECT_EQ(FormatNumber(1), "1");
  EXPECT_EQ(FormatNumber(-7), "-7");
  EXPECT_EQ(FormatNumber(123456789), "123456789");
  EXPECT_EQ(FormatNumber(0.25), "0.25");
}

// Every finite double prints in Go's float grammar and reads back bit-exactly.
TEST(MetricsTextFormat, FiniteNumbersRoundTripInGoGrammar) {
  const std::regex go_float(R"(^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$)");
  std::vector<double> values = {0.1,
                                1e-5,
                                1e21,
                                -2.5e-300,
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::min(),
                                std::numeric_limits<double>::denorm_min(),
                                9007199254740993.0,
                                1.0 / 3.0};
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> bits;
  while (values.size() < 2000) {
    const uint64_t b = bits(rng);
    double d;
    std::memcpy(&d, &b, sizeof(d));
    if (std::isfinite(d)) values.push_back(d);
  }
  for (double v : values) {
    const std::string s = FormatNumber(v);
    EXPECT_TRUE(std::regex_match(s, go_float)) << s;
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
  }
}

TEST(MetricsTextFormat, LabelValuesEscapeBackslashQuoteAndNewline) {
  std::string out;
  AppendEscapedLabelValue("a\\b\"c\nd'e\tf", &out);
  EXPECT_EQ(out, "a\\\\b\\\"c\\nd'e\tf");
}

TEST(MetricsTextFormat, HelpEscapesBackslashAndNewlineButNotQuotes) {
  std::string out;
  AppendEscapedHelp("C:\\path \"quoted\"\nnext", &out);
  EXPECT_EQ(out, "C:\\\\path \"quoted\"\\nnext");
}

TEST(MetricsTextFormat, HeaderLines) {
  std::string out;
  AppendHeader("http_requests_total", "The total number of HTTP requests.", "counter", &out);
  EXPECT_EQ(out,
            "# HELP http_requests_total The total number of HTTP requests.\n"
            "# TYPE http_requests_total counter\n");
}

TEST(MetricsTextFormat, MetricNames) {
  EXPECT_TRUE(IsValidMetricName("tessera_x_total"));
  EXPECT_TRUE(IsValidMetricName(":recording:rule"));
  EXPECT_TRUE(IsValidMetricName("_x9"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("9x"));
  EXPECT_FALSE(IsValidMetricName("x-y"));
  EXPECT_FALSE(IsValidMetricName("x y"));
}

TEST(MetricsTextFormat, LabelNames) {
  EXPECT_TRUE(IsValidLabelName("model_name"));
  EXPECT_TRUE(IsValidLabelName("_x"));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("1a"));
  EXPECT_FALSE(IsValidLabelName(""));
}

}  // namespace
}  // namespace tessera::metrics
