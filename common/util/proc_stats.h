// What this process read and holds, from /proc: for the shard loader's accounting (a rank
// must read about 1/N of the split tensors), the load figures, and tesserad's memory trimmer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::util {

// Bytes this process asked read()/pread() for (/proc/self/io rchar); 0 if unreadable.
uint64_t ReadCharBytes();
// Resident bytes of this process's mappings of `paths` (/proc/self/smaps Rss): the file
// pages it touched through the mapping.
uint64_t MappedResidentBytes(const std::vector<std::string>& paths);
// Peak resident set size (/proc/self/status VmHWM), bytes; 0 if unreadable.
uint64_t PeakRssBytes();
// Current resident set size (/proc/self/status VmRSS), bytes; 0 if unreadable.
uint64_t RssBytes();

}  // namespace tessera::util
