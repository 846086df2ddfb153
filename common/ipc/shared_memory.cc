#include "common/ipc/shared_memory.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessera::ipc {
namespace {

constexpr int kLowestDescriptor = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<SharedMemory>> SharedMemory::Create(const char* name, size_t size) {
  if (size == 0 || size > (size_t{1} << 42)) {
    return absl::InvalidArgumentError(absl::StrCat("a shared mapping of ", size, " bytes"));
  }
  const int created = memfd_create(name, MFD_CLOEXEC);
  if (created < 0) {
    return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  // Above the small numbers children get their descriptors at (ShareWithChild), so that
  // sharing one mapping at descriptor 3 never closes another's source descriptor 3.
  int fd = fcntl(created, F_DUPFD_CLOEXEC, kLowestDescriptor);
  if (fd >= 0) {
    close(created);
  } else {
    fd = created;
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot size a ", size, "-byte ", name, ": ", std::strerror(err)));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("mmap: ", std::strerror(err)));
  }
  return std::unique_ptr<SharedMemory>(new SharedMemory(fd, base, size));
}

absl::StatusOr<std::unique_ptr<SharedMemory>> SharedMemory::Map(int fd, const char* what) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " descriptor ", fd, ": ", std::strerror(errno)));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("descriptor ", fd, " is not a ", what, " (0 bytes)"));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot map ", what, " descriptor ", fd, ": ", std::strerror(errno)));
  }
  close(fd);
  return std::unique_ptr<SharedMemory>(new SharedMemory(-1, base, size));
}

SharedMemory::~SharedMemory() {
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

bool SharedMemory::ShareWithChild(int target_fd) const {
  if (fd_ < 0) return false;
  if (fd_ == target_fd) return fcntl(target_fd, F_SETFD, 0) == 0;
  return dup2(fd_, target_fd) == target_fd;  // dup2 clears close-on-exec on the copy
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout.count() <= 0) return;
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace tessera::ipc
