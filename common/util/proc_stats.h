// What this process read and holds, from /proc: for the shard loader's accounting (a rank
// must read about 1/N of the split tensors) and the load figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::worker {

// Bytes this process asked read()/pread() for (/proc/self/io rchar); 0 if unreadable.
uint64_t ReadCharBytes();
// Resident bytes of this process's mappings of `paths` (/proc/self/smaps Rss): the file
// pages it touched through the mapping.
uint64_t MappedResidentBytes(const std::vector<std::string>& paths);
// Peak resident set size (/proc/self/status VmHWM), bytes.
uint64_t PeakRssBytes();

}  // namespace tessera::worker
