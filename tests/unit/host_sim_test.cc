// The simulated host (docs/simulated-host.md): module files under a root, refusal while referenced,
// removal at refcount 0, the synthesised /proc/modules.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <sstream>

#include "host/host.h"
#include "support/doubles.h"
#include "support/process.h"

namespace dm::host {
namespace {

using test::LogCapture;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SimHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::make_temp_dir("dm-sim-host");
    host_ = make_host(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  void module(const std::string& name, int refcnt, const std::vector<std::string>& holders = {},
              const std::string& users = {}) {
    const std::string dir = root_ + "/sys/module/" + name;
    test::write_file(dir + "/refcnt", std::to_string(refcnt) + "\n");
    fs::create_directories(dir + "/holders");
    for (const auto& h : holders) fs::create_symlink("../../" + h, dir + "/holders/" + h);
    if (!users.empty()) test::write_file(dir + "/users", users);
  }
  [[nodiscard]] bool present(const std::string& name) const {
    return fs::exists(root_ + "/sys/module/" + name);
  }

  std::string root_;
  std::unique_ptr<Host> host_;
};

TEST_F(SimHostTest, PathsResolveUnderTheRoot) {
  EXPECT_EQ(host_->path("/run/nvidia/driver"), root_ + "/run/nvidia/driver");
  EXPECT_EQ(host_->path(kDriverPidFile), root_ + "/run/nvidia/nvidia-driver.pid");
  EXPECT_EQ(make_host("")->path("/run/nvidia/driver"), "/run/nvidia/driver");
}

TEST_F(SimHostTest, LoadedIffRefcntExists) {
  module("nvidia", 0);
  fs::create_directories(root_ + "/sys/module/nvidia_uvm");  // built-in style: no refcnt
  EXPECT_TRUE(host_->module_loaded("nvidia"));
  EXPECT_FALSE(host_->module_loaded("nvidia_uvm"));
  EXPECT_FALSE(host_->module_loaded("nouveau"));
}

TEST_F(SimHostTest, StateParsesRefcountHoldersAndUsers) {
  module("nvidia", 3, {"nvidia_modeset", "nvidia_uvm"}, "ns/a\n\nns/b\n");
  auto st = host_->module_state("nvidia");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(st->loaded);
  EXPECT_EQ(st->refcount, 3);
  EXPECT_THAT(st->holders, ::testing::ElementsAre("nvidia_modeset", "nvidia_uvm"));
  EXPECT_THAT(st->users, ::testing::ElementsAre("ns/a", "ns/b"));

  auto absent = host_->module_state("nouveau");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->loaded);
}

TEST_F(SimHostTest, MalformedRefcntIsAnErrorNamingTheFile) {
  test::write_file(root_ + "/sys/module/nvidia/refcnt", "lots\n");
  auto st = host_->module_state("nvidia");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("sys/module/nvidia/refcnt"));
  EXPECT_THAT(st.error().message, HasSubstr("lots"));
}

TEST_F(SimHostTest, BusyNvidiaIsRefusedAndNothingIsRemoved) {
  module("nvidia_modeset", 0);
  module("nvidia_uvm", 0);
  module("nvidia", 2, {}, "gpu-ns/trainer-0\ngpu-ns/notebook\n");
  LogCapture logs;
  const Status st = host_->unload_nvidia_modules();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(
      st.error().message,
      HasSubstr("nvidia: refcount 2, used by 2 process(es)/pod(s): gpu-ns/trainer-0, gpu-ns/notebook"));
  EXPECT_TRUE(present("nvidia_modeset"));
  EXPECT_TRUE(present("nvidia_uvm"));
  EXPECT_TRUE(present("nvidia"));
  const std::string log = logs.text();
  EXPECT_EQ(log.find("info Unloading NVIDIA driver kernel modules"), 0U) << log;
  EXPECT_THAT(log, HasSubstr("error Could not unload NVIDIA driver kernel modules, driver is in use"));
  EXPECT_THAT(log, ::testing::ContainsRegex("nvidia +0 +2"));  // the synthesised /proc/modules table
  EXPECT_THAT(log, ::testing::Not(HasSubstr("Unloaded kernel module")));
}

TEST_F(SimHostTest, FreeStackIsRemovedInOrderAndReferencesAreReleased) {
  module("nvidia_drm", 0);
  module("nvidia_modeset", 1, {"nvidia_drm"});
  module("nvidia_uvm", 0);
  module("nvidia", 2, {"nvidia_modeset", "nvidia_uvm"});
  module("i2c_core", 1, {"nvidia_drm"});  // outside the stack; nvidia_drm's removal releases it
  LogCapture logs;
  const Status st = host_->unload_nvidia_modules();
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (const auto* m : {"nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"})
    EXPECT_FALSE(present(m)) << m;
  EXPECT_EQ(test::read_file(root_ + "/sys/module/i2c_core/refcnt"), "0\n");
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ + "/sys/module/i2c_core/holders/nvidia_drm")));
  const std::string log = logs.text();
  const auto pos = [&](const std::string& m) { return log.find("Unloaded kernel module " + m + "\n"); };
  ASSERT_NE(pos("nvidia_drm"), std::string::npos) << log;
  EXPECT_LT(log.find("Unloading NVIDIA driver kernel modules"), pos("nvidia_drm"));
  EXPECT_LT(pos("nvidia_drm"), pos("nvidia_modeset"));
  EXPECT_LT(pos("nvidia_modeset"), pos("nvidia_uvm"));
  EXPECT_LT(pos("nvidia_uvm"), pos("nvidia"));
}

TEST_F(SimHostTest, UnloadWithNothingLoadedSucceeds) {
  EXPECT_TRUE(host_->unload_nvidia_modules().ok());
}

TEST_F(SimHostTest, NouveauRefusedWhileReferencedThenUnloadedAtZero) {
  module("nouveau", 1, {}, "pid 4242 (Xorg)\n");
  {
    LogCapture logs;
    const Status st = host_->unload_module("nouveau");
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.error().message, HasSubstr("in use (EBUSY)"));
    EXPECT_THAT(st.error().message, HasSubstr("pid 4242 (Xorg)"));
    EXPECT_TRUE(present("nouveau"));
    EXPECT_THAT(logs.text(), HasSubstr("info Unloading nouveau driver"));
  }
  module("nouveau", 0);
  LogCapture logs;
  ASSERT_TRUE(host_->unload_module("nouveau").ok());
  EXPECT_FALSE(present("nouveau"));
  EXPECT_THAT(logs.text(), HasSubstr("info Successfully unloaded nouveau driver"));
}

TEST_F(SimHostTest, UnloadingAModuleThatIsNotLoadedFails) {
  const Status st = host_->unload_module("nouveau");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("not loaded"));
}

TEST_F(SimHostTest, ProcModulesFileUnderTheRootWinsOverTheSynthesisedOne) {
  module("nvidia", 1, {"nvidia_uvm"});
  module("nvidia_uvm", 0);
  EXPECT_THAT(host_->nvidia_modules_table(), ::testing::ContainsRegex("nvidia +0 +1 +nvidia_uvm\n"));
  EXPECT_FALSE(host_->mofed_ready(/*use_host_mofed=*/true));
  module("mlx5_core", 0);
  EXPECT_TRUE(host_->mofed_ready(true));  // synthesised from sys/module

  test::write_file(root_ + "/proc/modules", "nvidia 999 7 - Live 0x0\n");
  EXPECT_THAT(host_->nvidia_modules_table(), ::testing::ContainsRegex("nvidia +999 +7"));
  EXPECT_FALSE(host_->mofed_ready(true));
}

}  // namespace
}  // namespace dm::host

namespace dm::host {
namespace {

// Read-only checks of the real host's libkmod path (nothing is ever unloaded from the real machine here).
TEST(RealHost, AbsentModuleIsNotLoadedAndHasNoState) {
  auto host = make_host("");
  EXPECT_FALSE(host->module_loaded("dm_test_no_such_module"));
  auto st = host->module_state("dm_test_no_such_module");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_FALSE(st->loaded);
  EXPECT_EQ(st->refcount, 0);
  const Status removed = host->unload_module("dm_test_no_such_module");
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.error().message,
            "failed to unload kernel module dm_test_no_such_module: module is not loaded (ENOENT)");
}

}  // namespace
}  // namespace dm::host
