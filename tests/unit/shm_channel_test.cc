// ShmChannel: one message per mailbox (and whether it was taken) and the errors of misuse, a
// message too large for the mailbox, the "went elsewhere" marker, waits that time out or are woken,
// and 20,000 messages of random sizes echoed through a forked process that mapped the channel from
// its inherited descriptor, each compared byte for byte with what was sent.
#include "common/ipc/shm_channel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tessera::ipc {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

absl::Status PostString(ShmChannel& ch, Mailbox box, const std::string& s) {
  return ch.Post(box, s.size(), [&](char* p) { std::copy(s.begin(), s.end(), p); });
}

// The message taken, or "<nothing>" / "<elsewhere>".
std::string TakeString(ShmChannel& ch, Mailbox box) {
  std::string got;
  switch (ch.Take(box, [&](const char* p, size_t n) { got.assign(p, n); })) {
    case ShmChannel::Taken::kNothing:
      return "<nothing>";
    case ShmChannel::Taken::kElsewhere:
      return "<elsewhere>";
    case ShmChannel::Taken::kMessage:
      return got;
  }
  return "<?>";
}

TEST(ShmChannel, OneMessagePerMailboxEachWay) {
  auto ch = ShmChannel::Create(4096);
  ASSERT_TRUE(ch.ok()) << ch.status();
  ShmChannel& c = **ch;
  EXPECT_EQ(c.capacity(), 4096u);
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), "<nothing>");
  EXPECT_FALSE(c.Untaken(Mailbox::kToWorker));
  ASSERT_TRUE(PostString(c, Mailbox::kToWorker, "step 1").ok());
  // Untaken says whether the reader has the message yet (the sender waits on it).
  EXPECT_TRUE(c.Untaken(Mailbox::kToWorker));
  EXPECT_FALSE(c.Untaken(Mailbox::kToController));
  // The other mailbox is independent.
  ASSERT_TRUE(PostString(c, Mailbox::kToController, "result 0").ok());
  // A second message before the first is taken would overwrite it.
  absl::Status busy = PostString(c, Mailbox::kToWorker, "step 2");
  EXPECT_TRUE(absl::IsFailedPrecondition(busy)) << busy;
  EXPECT_TRUE(absl::IsFailedPrecondition(c.PostElsewhere(Mailbox::kToWorker)));
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), "step 1");
  EXPECT_FALSE(c.Untaken(Mailbox::kToWorker));
  EXPECT_TRUE(c.Untaken(Mailbox::kToController));
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), "<nothing>");
  EXPECT_EQ(TakeString(c, Mailbox::kToController), "result 0");
  EXPECT_FALSE(c.Untaken(Mailbox::kToController));
  ASSERT_TRUE(c.PostElsewhere(Mailbox::kToController).ok());  // a marker is untaken too
  EXPECT_TRUE(c.Untaken(Mailbox::kToController));
  EXPECT_EQ(TakeString(c, Mailbox::kToController), "<elsewhere>");
  ASSERT_TRUE(PostString(c, Mailbox::kToWorker, "").ok());  // an empty step is a message
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), "");
}

TEST(ShmChannel, TooLargeIsRefusedAndTheMarkerSaysElsewhere) {
  auto ch = ShmChannel::Create(100);  // rounded up to a page
  ASSERT_TRUE(ch.ok());
  ShmChannel& c = **ch;
  ASSERT_EQ(c.capacity(), 4096u);
  const std::string fits(4096, 'x'), too_large(4097, 'y');
  absl::Status refused = PostString(c, Mailbox::kToWorker, too_large);
  EXPECT_TRUE(absl::IsOutOfRange(refused)) << refused;
  EXPECT_NE(refused.message().find("4097-byte message"), std::string::npos) << refused;
  // Nothing was posted.
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), "<nothing>");
  ASSERT_TRUE(c.PostElsewhere(Mailbox::kToWorker).ok());
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), "<elsewhere>");
  ASSERT_TRUE(PostString(c, Mailbox::kToWorker, fits).ok());
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), fits);
  EXPECT_FALSE(ShmChannel::Create(0).ok());

  // PostOrSendElsewhere: what fits is posted and sent nowhere else; what does not is sent
  // the other way first, then marked; a failed other way posts nothing.
  std::vector<std::string> other_way;
  auto post_or_send = [&](const std::string& msg, bool other_way_works) {
    return c.PostOrSendElsewhere(
        Mailbox::kToController, msg.size(), [&](char* p) { std::copy(msg.begin(), msg.end(), p); },
        [&] {
          other_way.push_back(msg);
          return other_way_works;
        });
  };
  ASSERT_TRUE(post_or_send(fits, true).ok());
  EXPECT_TRUE(other_way.empty());
  EXPECT_EQ(TakeString(c, Mailbox::kToController), fits);
  ASSERT_TRUE(post_or_send(too_large, true).ok());
  EXPECT_EQ(other_way, std::vector<std::string>{too_large});
  EXPECT_EQ(TakeString(c, Mailbox::kToController), "<elsewhere>");
  absl::Status failed = post_or_send(too_large, false);
  EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_EQ(TakeString(c, Mailbox::kToController), "<nothing>");
  ASSERT_TRUE(PostString(c, Mailbox::kToController, "x").ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(post_or_send(fits, true)));
  EXPECT_EQ(other_way.size(), 2u);
}

TEST(ShmChannel, WaitTimesOutIsWokenAndSeesAMessage) {
  auto ch = ShmChannel::Create(4096);
  ASSERT_TRUE(ch.ok());
  ShmChannel& c = **ch;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.Wait(Mailbox::kToController, milliseconds(30)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(25));

  // Wake ends a long wait early, without a message.
  std::thread waker([&] {
    std::this_thread::sleep_for(milliseconds(20));
    c.Wake(Mailbox::kToController);
  });
  t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.Wait(Mailbox::kToController, std::chrono::seconds(20)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  waker.join();

  std::thread poster([&] {
    std::this_thread::sleep_for(milliseconds(20));
    ASSERT_TRUE(PostString(c, Mailbox::kToController, "late").ok());
  });
  EXPECT_TRUE(c.Wait(Mailbox::kToController, std::chrono::seconds(20)));
  poster.join();
  EXPECT_EQ(TakeString(c, Mailbox::kToController), "late");
  // A message already there: no wait at all.
  ASSERT_TRUE(PostString(c, Mailbox::kToController, "now").ok());
  EXPECT_TRUE(c.Wait(Mailbox::kToController, microseconds(0)));
}

// The child maps the channel anew from the descriptor it inherited (as a spawned worker
// does after exec) and returns each message reversed, or a marker for a marker, until it
// gets "quit".
void EchoChild(int fd) {
  auto ch = ShmChannel::Attach(fd);
  if (!ch.ok()) _exit(3);
  ShmChannel& c = **ch;
  while (true) {
    if (!c.Wait(Mailbox::kToWorker, std::chrono::seconds(10))) _exit(4);
    std::string msg;
    const ShmChannel::Taken t =
        c.Take(Mailbox::kToWorker, [&](const char* p, size_t n) { msg.assign(p, n); });
    if (t == ShmChannel::Taken::kElsewhere) {
      if (!c.PostElsewhere(Mailbox::kToController).ok()) _exit(5);
      continue;
    }
    if (msg == "quit") _exit(0);
    std::reverse(msg.begin(), msg.end());
    if (!PostString(c, Mailbox::kToController, msg).ok()) _exit(6);
  }
}

TEST(ShmChannel, WaitThatPollsFirstSeesAMessageAndKeepsItsTimeout) {
  auto ch = ShmChannel::Create(4096);
  ASSERT_TRUE(ch.ok());
  ShmChannel& c = **ch;
  // A message posted while the waiter polls.
  std::thread poster([&] {
    std::this_thread::sleep_for(milliseconds(5));
    ASSERT_TRUE(PostString(c, Mailbox::kToWorker, "polled").ok());
  });
  EXPECT_TRUE(c.Wait(Mailbox::kToWorker, std::chrono::seconds(20), std::chrono::seconds(10)));
  poster.join();
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), "polled");
  // One posted after the poll window, while the waiter sleeps.
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(30));
    ASSERT_TRUE(PostString(c, Mailbox::kToWorker, "slept").ok());
  });
  EXPECT_TRUE(c.Wait(Mailbox::kToWorker, std::chrono::seconds(20), microseconds(100)));
  late.join();
  EXPECT_EQ(TakeString(c, Mailbox::kToWorker), "slept");
  // A poll window longer than the timeout ends with the timeout.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.Wait(Mailbox::kToWorker, milliseconds(30), std::chrono::seconds(60)));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, milliseconds(25));
  EXPECT_LT(waited, std::chrono::seconds(30));
}

TEST(ShmChannel, EchoThroughAForkedProcessThatMappedTheDescriptor) {
  auto ch = ShmChannel::Create(64 << 10);
  ASSERT_TRUE(ch.ok());
  ShmChannel& c = **ch;
  const int child_fd = 37;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!c.ShareWithChild(child_fd)) _exit(2);
    EchoChild(child_fd);
  }
  std::mt19937 rng(7);
  int markers = 0;
  for (int i = 0; i < 20000; ++i) {
    if (i % 997 == 0) {
      ASSERT_TRUE(c.PostElsewhere(Mailbox::kToWorker).ok());
      ASSERT_TRUE(c.Wait(Mailbox::kToController, std::chrono::seconds(10)));
      ASSERT_EQ(TakeString(c, Mailbox::kToController), "<elsewhere>");
      ++markers;
      continue;
    }
    std::string msg(rng() % 3 == 0 ? rng() % (64 << 10) : rng() % 64, '\0');
    for (char& ch : msg) ch = static_cast<char>(rng());
    ASSERT_TRUE(PostString(c, Mailbox::kToWorker, msg).ok()) << i;
    ASSERT_TRUE(c.Wait(Mailbox::kToController, std::chrono::seconds(10))) << i;
    std::string want(msg.rbegin(), msg.rend());
    ASSERT_EQ(TakeString(c, Mailbox::kToController), want) << i;
  }
  EXPECT_EQ(markers, 21);
  ASSERT_TRUE(PostString(c, Mailbox::kToWorker, "quit").ok());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ShmChannel, AttachRefusesWhatIsNotAChannel) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  auto from_pipe = ShmChannel::Attach(pipe_fds[0]);
  EXPECT_TRUE(absl::IsInvalidArgument(from_pipe.status())) << from_pipe.status();
  close(pipe_fds[0]);
  close(pipe_fds[1]);

  // A memory file of the right size but without the channel's header.
  const int fd = memfd_create("not-a-channel", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 3 * 4096), 0);
  auto zeros = ShmChannel::Attach(fd);
  EXPECT_TRUE(absl::IsInvalidArgument(zeros.status())) << zeros.status();
  EXPECT_NE(zeros.status().message().find("is not a version 1 step channel"), std::string::npos)
      << zeros.status();
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "a descriptor that was mapped is closed, channel or not";

  EXPECT_FALSE(ShmChannel::Attach(-1).ok());
}

}  // namespace
}  // namespace tessera::ipc
