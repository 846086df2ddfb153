#include "common/util/proc_stats.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::util {

uint64_t ReadCharBytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "rchar:") return value;
  }
  return 0;
}

uint64_t MappedResidentBytes(const std::vector<std::string>& paths) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool counting = false;
  uint64_t total = 0;
  while (std::getline(in, line)) {
    // A mapping's header line: "start-end perms offset dev inode   path".
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!f.empty() && f[0].find('-') != std::string::npos && f.size() >= 5 && f[0].back() != ':') {
      counting = false;
      if (f.size() >= 6) {
        for (const std::string& p : paths) counting = counting || f.back() == p;
      }
      continue;
    }
    if (counting && f.size() >= 2 && f[0] == "Rss:") {
      uint64_t kb = 0;
      if (absl::SimpleAtoi(f[1], &kb)) total += kb * 1024;
    }
  }
  return total;
}

namespace {

// The value of a "Key:   N kB" line of /proc/self/status, in bytes; 0 if absent.
uint64_t StatusBytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      std::istringstream s(line.substr(key.size()));
      uint64_t kb = 0;
      s >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace

uint64_t PeakRssBytes() { return StatusBytes("VmHWM:"); }

uint64_t RssBytes() { return StatusBytes("VmRSS:"); }

}  // namespace tessera::util
