// Names the calling thread, so that `top -H`, `ps -L`, perf and gdb tell the daemon's threads
// apart (the serving engine, the HTTP threads, a worker's pool threads).
#pragma once

#include <pthread.h>

#include <string>

namespace tessera {

// Linux keeps at most 15 characters of a thread's name; a longer one is cut there.
inline void NameThisThread(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace tessera
