// The daemon's log lines on stderr: human-readable by default ("2026-11-29T10:00:00.123Z
// INFO  message key=value"), one JSON object per line with --log-format json. Thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tessera::daemon {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// "debug" | "info" | "warning" | "error" and "text" | "json"; anything else leaves the
// setting unchanged and returns false.
bool SetLogLevel(const std::string& level);
bool SetLogFormat(const std::string& format);

using LogFields = std::vector<std::pair<std::string, std::string>>;

void Log(LogLevel level, const std::string& message, const LogFields& fields = {});
inline void LogInfo(const std::string& m, const LogFields& f = {}) { Log(LogLevel::kInfo, m, f); }
inline void LogWarning(const std::string& m, const LogFields& f = {}) {
  Log(LogLevel::kWarning, m, f);
}
inline void LogError(const std::string& m, const LogFields& f = {}) { Log(LogLevel::kError, m, f); }
inline void LogDebug(const std::string& m, const LogFields& f = {}) { Log(LogLevel::kDebug, m, f); }

// The line Log would write (without the newline), for tests.
std::string FormatLogLine(LogLevel level, const std::string& message, const LogFields& fields,
                          bool json, const std::string& timestamp);

}  // namespace tessera::daemon
