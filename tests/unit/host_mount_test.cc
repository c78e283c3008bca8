// Recursive unmount of the driver root with real tmpfs and bind mounts. Each test runs in a forked child
// that has its own private mount namespace, so nothing reaches the machine's mount table (needs root).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>

#include "host/host.h"
#include "host/mounts.h"
#include "support/process.h"

namespace dm::host {
namespace {

namespace fs = std::filesystem;

// Runs `body` in a child inside a private mount namespace; returns what the child reported ("" = passed).
std::string in_private_mount_namespace(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    ::close(fds[0]);
    std::string result;
    if (::unshare(CLONE_NEWNS) != 0) {
      result = std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno);
    } else if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      result = std::string("making / private: ") + std::strerror(errno);
    } else {
      result = body();
    }
    if (!result.empty()) (void)!::write(fds[1], result.data(), result.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[1024];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out += " (child did not exit cleanly)";
  return out;
}

std::string mount_tmpfs(const std::string& where) {
  fs::create_directories(where);
  if (::mount("dm-test", where.c_str(), "tmpfs", 0, "size=1m") != 0) {
    return "mount tmpfs on " + where + ": " + std::strerror(errno) + "\n";
  }
  return {};
}

std::string bind_mount(const std::string& from, const std::string& where) {
  fs::create_directories(from);
  fs::create_directories(where);
  if (::mount(from.c_str(), where.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return "bind " + from + " on " + where + ": " + std::strerror(errno) + "\n";
  }
  return {};
}

std::string list(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " ";
  return s;
}

bool strictly_below(const std::string& p, const std::string& ancestor) {
  return p.size() > ancestor.size() && p.compare(0, ancestor.size(), ancestor) == 0 &&
         p[ancestor.size()] == '/';
}

// Lines as the kernel writes them (proc(5)); a mount point holding a space, a tab, a newline or a backslash
// is written with octal escapes, which must be decoded or the driver root under such a path is never found.
TEST(MountInfo, TheFifthFieldIsTheMountPointWithItsOctalEscapesDecoded) {
  const std::string mountinfo =
      "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
      "36 35 98:0 /mnt1 /run/nvidia/driver rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
      "40 36 0:50 / /run/nvidia/driver/with\\040space rw - tmpfs dm-test rw\n"
      "41 36 0:51 / /odd\\011tab\\012nl\\134bs rw - tmpfs dm-test rw\n"
      "42 36 0:52 / /not\\08octal\\ rw - tmpfs dm-test rw\n"
      "broken line\n"
      "\n";
  EXPECT_THAT(mount_points(mountinfo),
              ::testing::ElementsAre("/proc", "/run/nvidia/driver", "/run/nvidia/driver/with space",
                                     "/odd\ttab\nnl\\bs", "/not\\08octal\\"));
  EXPECT_THAT(mount_points(""), ::testing::IsEmpty());
}

// The real table of this process, read without libmount: / is always mounted.
TEST(MountInfo, ThisProcessTableHasTheRootMount) {
  auto m = mounts_under("/");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_THAT(*m, ::testing::Contains("/"));
}

class MountTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = fs::canonical(test::make_temp_dir("dm-host-mounts")).string(); }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(MountTest, NestedMountsAreAllGoneChildrenBeforeParents) {
  const std::string problem = in_private_mount_namespace([&]() -> std::string {
    const std::string driver = root_ + "/run/nvidia/driver";
    std::string err = mount_tmpfs(driver);
    err += mount_tmpfs(driver + "/usr");
    err += mount_tmpfs(driver + "/usr/lib");
    err += mount_tmpfs(driver + "/usr/lib");  // stacked on the same point
    err += bind_mount(root_ + "/elsewhere/dev", driver + "/dev");
    err += mount_tmpfs(driver + "/dev/shm");
    err += mount_tmpfs(driver + "/with space");
    err += mount_tmpfs(root_ + "/run/nvidia/driver2");  // a sibling with the same prefix stays
    if (!err.empty()) return err;

    auto before = mounts_under(driver);
    if (!before || before->size() != 7)
      return "expected 7 mounts before, got " + (before ? list(*before) : "error");

    auto done = unmount_tree(driver);
    if (!done) return "unmount_tree failed: " + done.error().message;
    std::string out;
    if (done->size() != 7) out += "unmounted " + list(*done) + "\n";
    for (size_t i = 0; i < done->size(); ++i) {
      for (size_t j = i + 1; j < done->size(); ++j) {
        if (strictly_below((*done)[j], (*done)[i]))
          out += (*done)[i] + " before its child " + (*done)[j] + "\n";
      }
    }
    auto after = mounts_under(driver);
    if (!after || !after->empty()) out += "still mounted: " + (after ? list(*after) : "error") + "\n";
    auto sibling = mounts_under(root_ + "/run/nvidia/driver2");
    if (!sibling || sibling->size() != 1) out += "the sibling driver2 mount was touched\n";
    ::umount2((root_ + "/run/nvidia/driver2").c_str(), MNT_DETACH);
    return out;
  });
  EXPECT_EQ(problem, "");
}

TEST_F(MountTest, SimulatedHostUnmountsTheRealMountsUnderItsRoot) {
  const std::string problem = in_private_mount_namespace([&]() -> std::string {
    const std::string driver = root_ + "/run/nvidia/driver";
    std::string err = mount_tmpfs(driver);
    err += mount_tmpfs(driver + "/lib/firmware");
    err += bind_mount(root_ + "/proc-ish", driver + "/proc");
    if (!err.empty()) return err;

    std::ostringstream log;
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(log);
    sink->set_pattern("%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));

    auto host = make_host(root_);
    const Status st = host->unmount_driver_root();
    if (!st.ok()) return "unmount_driver_root failed: " + st.error().message;
    std::string out;
    auto after = mounts_under(driver);
    if (!after || !after->empty()) out += "still mounted: " + (after ? list(*after) : "error") + "\n";
    if (log.str().find("Successfully unmounted /run/nvidia/driver and all its submounts") ==
        std::string::npos) {
      out += "missing success log in: " + log.str();
    }
    return out;
  });
  EXPECT_EQ(problem, "");
}

TEST_F(MountTest, ExistingButUnmountedDriverRootIsSuccess) {
  const std::string problem = in_private_mount_namespace([&]() -> std::string {
    fs::create_directories(root_ + "/run/nvidia/driver/usr");
    auto done = unmount_tree(root_ + "/run/nvidia/driver");
    if (!done) return "unmount_tree failed: " + done.error().message;
    if (!done->empty()) return "unmounted something: " + list(*done);
    const Status st = make_host(root_)->unmount_driver_root();
    return st.ok() ? std::string() : "unmount_driver_root failed: " + st.error().message;
  });
  EXPECT_EQ(problem, "");
}

TEST_F(MountTest, MountTableListsDeepestFirstAndTopOfAStackFirst) {
  const std::string problem = in_private_mount_namespace([&]() -> std::string {
    const std::string driver = root_ + "/run/nvidia/driver";
    std::string err = mount_tmpfs(driver);
    err += mount_tmpfs(driver + "/a/b");
    err += mount_tmpfs(driver + "/a");  // mounted later, on top of the parent of a/b
    if (!err.empty()) return err;
    auto m = mounts_under(driver);
    if (!m) return m.error().message;
    const std::vector<std::string> want = {driver + "/a/b", driver + "/a", driver};
    if (*m != want) return "order: " + list(*m);
    // a/b is hidden under the later mount of a: only reachable after a is gone, which needs a second pass.
    auto done = unmount_tree(driver);
    if (!done) return "unmount_tree failed: " + done.error().message;
    auto after = mounts_under(driver);
    return after && after->empty() ? std::string() : "still mounted: " + (after ? list(*after) : "error");
  });
  EXPECT_EQ(problem, "");
}

}  // namespace
}  // namespace dm::host
