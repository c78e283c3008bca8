// State and PID files, Mellanox detection, MOFED readiness and its bounded wait, the host nvidia-smi probe
// and child processes, on a simulated host rooted in a temp dir.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <sstream>

#include "host/host.h"
#include "host/process.h"
#include "support/doubles.h"
#include "support/process.h"

namespace dm::host {
namespace {

using test::FakeClock;
using test::LogCapture;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class HostFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::make_temp_dir("dm-host-files");
    host_ = make_host(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void script(const std::string& rel, const std::string& body) {
    const std::string p = root_ + rel;
    test::write_file(p, "#!/bin/sh\n" + body);
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  }

  std::string root_;
  std::unique_ptr<Host> host_;
};

TEST_F(HostFilesTest, PidFileIsRemovedAndAMissingOneIsFine) {
  const std::string pid = root_ + "/run/nvidia/nvidia-driver.pid";
  test::write_file(pid, "1234\n");
  LogCapture logs;
  host_->remove_pid_file();
  EXPECT_FALSE(fs::exists(pid));
  host_->remove_pid_file();
  EXPECT_EQ(logs.text(), "");
}

TEST_F(HostFilesTest, PidFileThatCannotBeRemovedIsAWarning) {
  const std::string pid = root_ + "/run/nvidia/nvidia-driver.pid";
  fs::create_directories(pid);  // unlink(2) of a directory fails with EISDIR
  LogCapture logs;
  host_->remove_pid_file();
  EXPECT_TRUE(fs::exists(pid));
  EXPECT_THAT(logs.text(), HasSubstr("warning Failed to remove PID file " + pid));
}

TEST_F(HostFilesTest, DriverStateFile) {
  auto missing = host_->read_driver_state();
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  test::write_file(root_ + "/run/nvidia/nvidia-driver.state", "digest-abc\n");
  auto present = host_->read_driver_state();
  ASSERT_TRUE(present.ok());
  ASSERT_TRUE(present->has_value());
  EXPECT_EQ(**present, "digest-abc\n");
  EXPECT_TRUE(driver_config_matches("digest-abc", **present));
  EXPECT_FALSE(driver_config_matches("digest-abd", **present));
  EXPECT_FALSE(driver_config_matches(" digest-abc", **present));  // the env value is not trimmed

  fs::remove(root_ + "/run/nvidia/nvidia-driver.state");
  fs::create_directories(root_ + "/run/nvidia/nvidia-driver.state");
  auto unreadable = host_->read_driver_state();
  ASSERT_FALSE(unreadable.ok());
  EXPECT_TRUE(unreadable.error().errno_is(EISDIR));  // open(2) takes a directory, read(2) refuses it
  EXPECT_THAT(unreadable.error().message, HasSubstr("nvidia-driver.state"));
}

TEST_F(HostFilesTest, FirstMellanoxDeviceInBdfOrder) {
  EXPECT_FALSE(host_->first_mellanox_device().has_value());
  const std::string dev = root_ + "/sys/bus/pci/devices/";
  test::write_file(dev + "0000:01:00.0/vendor", "0x10de\n");
  EXPECT_FALSE(host_->first_mellanox_device().has_value());
  test::write_file(dev + "0000:c1:00.0/vendor", "0x15b3\n");
  test::write_file(dev + "0000:21:00.1/vendor", "0x15b3\n");
  EXPECT_EQ(host_->first_mellanox_device(), std::optional<std::string>("0000:21:00.1"));
}

TEST_F(HostFilesTest, MofedReadiness) {
  EXPECT_FALSE(host_->mofed_ready(Mofed::kContainer));
  test::write_file(root_ + "/run/mellanox/drivers/.driver-ready", "");
  EXPECT_TRUE(host_->mofed_ready(Mofed::kContainer));
  EXPECT_FALSE(host_->mofed_ready(Mofed::kHost));  // host MOFED: only mlx5_core in /proc/modules counts
  test::write_file(root_ + "/proc/modules", "mlx5_core 2445312 1 mlx5_ib, Live 0x0\n");
  EXPECT_TRUE(host_->mofed_ready(Mofed::kHost));
}

TEST_F(HostFilesTest, WaitForMofedReturnsOnceReadyAndLogsProgress) {
  FakeClock clock;
  clock.on_sleep = [&](int n) {
    if (n == 3) test::write_file(root_ + "/run/mellanox/drivers/.driver-ready", "");
  };
  LogCapture logs;
  const Status st =
      wait_for_mofed(*host_, Mofed::kContainer, clock, Deadline::after(clock, std::chrono::minutes(1)),
                     CancelToken(), std::chrono::seconds(5));
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(clock.sleeps(), 3);
  const std::string log = logs.text();
  EXPECT_THAT(log, HasSubstr("Waiting for MOFED to be installed... (waiting for file "
                             "/run/mellanox/drivers/.driver-ready, elapsed 0s, timeout in 60s)"));
  EXPECT_THAT(log, HasSubstr("elapsed 10s, timeout in 50s"));
  EXPECT_THAT(log, HasSubstr("MOFED driver is ready (waited 15s)"));
}

TEST_F(HostFilesTest, WaitForMofedFailsAtTheDeadline) {
  FakeClock clock;
  const Status st =
      wait_for_mofed(*host_, Mofed::kHost, clock, Deadline::after(clock, std::chrono::seconds(12)),
                     CancelToken(), std::chrono::seconds(5));
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("MOFED driver not ready after 12s"));
  EXPECT_THAT(st.error().message, HasSubstr("mlx5_core"));
  EXPECT_EQ(clock.now() - TimePoint{}, std::chrono::seconds(12));  // the last sleep is cut to the deadline
}

TEST_F(HostFilesTest, WaitForMofedStopsWhenCancelled) {
  FakeClock clock;
  CancelToken cancel;
  clock.on_sleep = [&](int n) {
    if (n == 2) cancel.cancel();
  };
  const Status st =
      wait_for_mofed(*host_, Mofed::kContainer, clock, Deadline::none(), cancel, std::chrono::seconds(5));
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("interrupted"));
  EXPECT_EQ(clock.sleeps(), 2);
}

TEST_F(HostFilesTest, NoHostNvidiaSmiMeansNoHostDriver) {
  EXPECT_EQ(host_->host_driver_version(), std::nullopt);
}

TEST_F(HostFilesTest, HostNvidiaSmiIsRunWithTheQueryArgumentsAndStderrIsDiscarded) {
  script("/host/usr/bin/nvidia-smi",
         "echo \"$@\" > " + root_ + "/args\necho 'some warning' >&2\nprintf '550.54.15\\n550.54.15\\n'\n");
  EXPECT_EQ(host_->host_driver_version(), std::optional<std::string>("550.54.15"));
  EXPECT_EQ(test::read_file(root_ + "/args"), "--query-gpu=driver_version --format=csv,noheader\n");
}

TEST_F(HostFilesTest, FailingOrSilentNvidiaSmiMeansNoHostDriver) {
  script("/host/usr/bin/nvidia-smi", "echo 550.54.15\nexit 9\n");
  EXPECT_EQ(host_->host_driver_version(), std::nullopt);
  script("/host/usr/bin/nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2\nexit 0\n");
  EXPECT_EQ(host_->host_driver_version(), std::nullopt);
}

TEST_F(HostFilesTest, RunCapturesOutputAndExitCode) {
  const CommandResult r = host_->run({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.output, "out\nerr\n");
  const CommandResult killed = host_->run({"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(killed.exit_code, 128 + 15);
  const CommandResult missing = host_->run({"/nonexistent/dm-no-such-binary"});
  EXPECT_EQ(missing.exit_code, -1);
  EXPECT_THAT(missing.output, HasSubstr("/nonexistent/dm-no-such-binary"));
  const CommandResult quiet = run_process({"sh", "-c", "echo out; echo err >&2"}, StderrMode::kDiscard);
  EXPECT_EQ(quiet.output, "out\n");
}

TEST_F(HostFilesTest, MissingDriverRootIsNothingToUnmount) {
  LogCapture logs;
  EXPECT_TRUE(host_->unmount_driver_root().ok());
  EXPECT_THAT(logs.text(), HasSubstr("info Driver root directory does not exist, nothing to unmount"));
}

}  // namespace
}  // namespace dm::host
