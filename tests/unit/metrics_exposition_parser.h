// A small, independent reader of the Prometheus text format 0.0.4 for the metrics tests:
// it follows the format's grammar (not the writer's code) so tests can check structure and
// invariants of whatever the registry exposes.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::metrics::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> help;  // metric family -> unescaped help
  std::map<std::string, std::string> type;  // metric family -> type
  std::vector<Sample> samples;
  std::vector<std::string> errors;  // lines that do not follow the grammar
};

// Go's strconv.ParseFloat as Prometheus uses it: decimal, exponent, and the special values
// in any letter case ("NaN", "Nan", "+Inf", "inf", "-Infinity").
inline std::optional<double> ParsePromFloat(const std::string& s) {
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "+inf" || lower == "inf" || lower == "+infinity" || lower == "infinity") {
    return HUGE_VAL;
  }
  if (lower == "-inf" || lower == "-infinity") return -HUGE_VAL;
  if (lower == "nan" || lower == "+nan" || lower == "-nan") return std::nan("");
  if (s.empty()) return std::nullopt;
  for (char c : s) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

inline Exposition ParseExposition(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, keyword, name;
      words >> hash >> keyword >> name;
      std::string rest;
      const size_t prefix = std::string("# ").size() + keyword.size() + 1 + name.size();
      if (line.size() > prefix) rest = line.substr(prefix + 1);
      if (keyword == "HELP") {
        std::string unescaped;
        for (size_t i = 0; i < rest.size(); ++i) {
          if (rest[i] == '\\' && i + 1 < rest.size()) {
            const char n = rest[++i];
            unescaped.push_back(n == 'n' ? '\n' : n);
          } else {
            unescaped.push_back(rest[i]);
          }
        }
        e.help[name] = unescaped;
      } else if (keyword == "TYPE") {
        e.type[name] = rest;
      }
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name.push_back(line[i++]);
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string label;
        while (i < line.size() && line[i] != '=') label.push_back(line[i++]);
        if (i + 1 >= line.size() || line[i + 1] != '"') {
          e.errors.push_back(line);
          break;
        }
        i += 2;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            const char n = line[++i];
            value.push_back(n == 'n' ? '\n' : n);
          } else {
            value.push_back(line[i]);
          }
          ++i;
        }
        ++i;  // closing quote
        s.labels[label] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      e.errors.push_back(line);
      continue;
    }
    const std::optional<double> v = ParsePromFloat(line.substr(i + 1));
    if (!v) {
      e.errors.push_back(line);
      continue;
    }
    s.value = *v;
    e.samples.push_back(s);
  }
  return e;
}

}  // namespace tessera::metrics::testing
