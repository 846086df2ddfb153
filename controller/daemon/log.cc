#include "controller/daemon/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "nlohmann/json.hpp"

namespace tessera::daemon {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<bool> g_json{false};
std::mutex g_mu;

const char* Name(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    default:
      return "error";
  }
}

std::string Now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm;
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

bool NeedsQuotes(const std::string& v) {
  if (v.empty()) return true;
  for (unsigned char c : v) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) return true;
  }
  return false;
}

}  // namespace

bool SetLogLevel(const std::string& level) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    if (level == Name(l)) {
      g_level = static_cast<int>(l);
      return true;
    }
  }
  return false;
}

bool SetLogFormat(const std::string& format) {
  if (format != "text" && format != "json") return false;
  g_json = format == "json";
  return true;
}

std::string FormatLogLine(LogLevel level, const std::string& message, const LogFields& fields,
                          bool json, const std::string& timestamp) {
  if (json) {
    nlohmann::ordered_json j;
    j["ts"] = timestamp;
    j["level"] = Name(level);
    j["msg"] = message;
    for (const auto& [k, v] : fields) j[k] = v;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = timestamp + " " + Name(level) + " " + message;
  for (const auto& [k, v] : fields) {
    line += " " + k + "=";
    line += NeedsQuotes(v)
                ? nlohmann::json(v).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                : v;
  }
  return line;
}

void Log(LogLevel level, const std::string& message, const LogFields& fields) {
  if (static_cast<int>(level) < g_level.load()) return;
  std::string line = FormatLogLine(level, message, fields, g_json.load(), Now());
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace tessera::daemon
