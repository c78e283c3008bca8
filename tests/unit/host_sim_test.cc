// The simulated host (docs/simulated-host.md): module files under a root, refusal while referenced or while
// a process has a device file open (an NVIDIA major's, nvidia-frontend's, or a DRM node sysfs binds to the
// stack), removal at refcount 0 (releasing holders links and vGPU pins) with the kernel's errno otherwise, a
// kernel without module unloading, a built-in or permanent nvidia, the synthesised /proc/modules.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "fixtures/host/fake_proc.h"
#include "host/host.h"
#include "host/modules.h"
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

  void module(const std::string& name, int refcnt, const std::vector<std::string>& holders = {}) {
    const std::string dir = root_ + "/sys/module/" + name;
    test::write_file(dir + "/refcnt", std::to_string(refcnt) + "\n");
    fs::create_directories(dir + "/holders");
    for (const auto& h : holders)
      fs::create_symlink(fmt::format("../../{}", h), fmt::format("{}/holders/{}", dir, h));
  }
  // A process with /dev/nvidia0 open, in the pod `uid` ("" = a host process).
  void gpu_process(int pid, const std::string& comm, const std::string& uid = {}) {
    test::fake_proc::write_real_proc_devices(root_);
    test::fake_proc::make_char_device(root_, "/dev/nvidia0", 195, 0);
    test::fake_proc::make_process(root_, pid, comm,
                                  uid.empty() ? "0::/\n" : "0::/kubepods/besteffort/pod" + uid + "/c0\n",
                                  {{3, "/dev/nvidia0"}});
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

TEST_F(SimHostTest, LoadedFromRefcntOrProcModulesAndADirectoryAloneIsBuiltIn) {
  module("nvidia", 0);
  fs::create_directories(root_ + "/sys/module/nvidia_uvm");  // built-in style: no refcnt, no initstate
  EXPECT_TRUE(host_->module_loaded("nvidia"));
  EXPECT_FALSE(host_->module_loaded("nvidia_uvm"));
  EXPECT_TRUE(host_->module_state("nvidia_uvm")->builtin);
  EXPECT_FALSE(host_->module_loaded("nouveau"));
  EXPECT_FALSE(host_->module_state("nouveau")->builtin);
}

TEST_F(SimHostTest, StateParsesRefcountHoldersAndNoUsersFile) {
  module("nvidia", 3, {"nvidia_modeset", "nvidia_uvm"});
  test::write_file(root_ + "/sys/module/nvidia/users", "ns/a\n");  // node-sim's bookkeeping, not the kernel's
  auto st = host_->module_state("nvidia");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(st->loaded);
  EXPECT_TRUE(st->unloadable);
  EXPECT_EQ(st->refcount, 3);
  EXPECT_THAT(st->holders, ::testing::ElementsAre("nvidia_modeset", "nvidia_uvm"));
  EXPECT_THAT(st->users, ::testing::IsEmpty());

  auto absent = host_->module_state("nouveau");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->loaded);
}

TEST_F(SimHostTest, HolderProcessesAreFoundByDeviceNumberWithTheirPod) {
  module("nvidia", 2);
  gpu_process(4242, "python3", "8f4b3a2e-1c5d-4e6f-9a0b-7c8d9e0f1a2b");
  gpu_process(17, "nvidia-smi");
  const auto holders = host_->nvidia_holder_processes();
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].label(), "pid 17 (nvidia-smi)");
  EXPECT_EQ(holders[0].pod_uid, "");
  EXPECT_EQ(holders[1].label(), "pid 4242 (python3)");
  EXPECT_EQ(holders[1].pod_uid, "8f4b3a2e-1c5d-4e6f-9a0b-7c8d9e0f1a2b");
  EXPECT_THAT(holders[1].modules, ::testing::ElementsAre("nvidia"));
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
  module("nvidia", 2);
  gpu_process(4242, "python3");
  LogCapture logs;
  const Status st = host_->unload_nvidia_modules();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(
      st.error().message,
      HasSubstr("none was unloaded: nvidia: refcount 2, 2 other reference(s), device files open in pid "
                "4242 (python3)"));
  EXPECT_TRUE(present("nvidia_modeset"));
  EXPECT_TRUE(present("nvidia_uvm"));
  EXPECT_TRUE(present("nvidia"));
  const std::string log = logs.text();
  EXPECT_EQ(log.find("info Unloading NVIDIA driver kernel modules"), 0U) << log;
  // Upstream's per-module line for the module that blocks, its holders in place of the errno.
  EXPECT_THAT(log,
              HasSubstr("warning Failed to unload kernel module nvidia: refcount 2, 2 other reference(s), "
                        "device files open in pid 4242 (python3)\n"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("Failed to unload kernel module nvidia_uvm")));
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

// A removal is one rename out of sys/module (a run killed in it never leaves a directory without its refcnt,
// which would read as built in); what a run killed after the rename left is cleared by the next removal.
TEST_F(SimHostTest, ARemovedModuleLeavesNothingBehindAndALeftoverOfAKilledRunIsCleared) {
  module("nvidia", 0);
  test::write_file(root_ + "/sys/.unloaded-nvidia/refcnt", "0\n");  // a killed run's
  const Status st = host_->unload_nvidia_modules();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_FALSE(present("nvidia"));
  EXPECT_FALSE(fs::exists(root_ + "/sys/.unloaded-nvidia"));
  auto nvidia = host_->module_state("nvidia");
  ASSERT_TRUE(nvidia.ok()) << nvidia.error().message;
  EXPECT_FALSE(nvidia->loaded);
  EXPECT_FALSE(nvidia->builtin);
}

TEST_F(SimHostTest, VgpuStackIsUnloadedAndItsPinsOnNvidiaAreReleased) {
  // nvidia_vgpu_vfio holds two references on nvidia that no holders link shows.
  module("nvidia_vgpu_vfio", 0);
  test::write_file(root_ + "/sys/module/nvidia_vgpu_vfio/pins/nvidia", "2\n");
  module("nvidia", 2);
  ASSERT_TRUE(host_->can_unload_nvidia().ok());
  LogCapture logs;
  const Status st = host_->unload_nvidia_modules();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_FALSE(present("nvidia_vgpu_vfio"));
  EXPECT_FALSE(present("nvidia"));
  const std::string log = logs.text();
  EXPECT_LT(log.find("Unloaded kernel module nvidia_vgpu_vfio"), log.find("Unloaded kernel module nvidia\n"));
}

TEST_F(SimHostTest, VgpuStackHeldByAProcessIsLeftWhole) {
  module("nvidia_vgpu_vfio", 0);
  test::write_file(root_ + "/sys/module/nvidia_vgpu_vfio/pins/nvidia", "2\n");
  module("nvidia", 3);
  gpu_process(900, "qemu-system-x86");
  const Status st = host_->unload_nvidia_modules();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(
      st.error().message,
      HasSubstr("nvidia: refcount 3, 1 other reference(s), device files open in pid 900 (qemu-system-x86)"));
  EXPECT_TRUE(present("nvidia_vgpu_vfio"));
  EXPECT_TRUE(present("nvidia"));
}

TEST_F(SimHostTest, AReferenceLeftAfterARemovalIsReportedAsAPartialUnload) {
  // nvidia_vgpu_vfio may pin nvidia twice but here pins nothing, so the plan cannot tell the second reference
  // on nvidia (a kernel user) from a pin; the re-read after each removal sees it and stops before nvidia.
  module("nvidia_uvm", 0);
  module("nvidia", 2, {"nvidia_uvm"});
  test::write_file(root_ + "/sys/module/nvidia_vgpu_vfio/refcnt", "0\n");
  test::write_file(root_ + "/sys/module/nvidia_vgpu_vfio/pins/nvidia", "0\n");  // pins nothing after all
  fs::create_directories(root_ + "/sys/module/nvidia_vgpu_vfio/holders");
  const Status st = host_->unload_nvidia_modules();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message,
              HasSubstr("partially unloaded (already removed: nvidia_uvm, nvidia_vgpu_vfio)"));
  EXPECT_THAT(st.error().message, HasSubstr("nvidia: refcount 1, 1 other reference(s)"));
  EXPECT_TRUE(present("nvidia"));
}

TEST_F(SimHostTest, KernelWithoutModuleUnloadingIsAClearErrorAndNothingChanges) {
  // The real GPU host's /proc/modules: nvidia and nvidia_uvm Live with "-" counts, no refcnt files.
  test::write_file(root_ + "/proc/modules", test::fake_proc::real_proc_modules());
  for (const auto* m : {"nvidia", "nvidia_uvm"})
    test::write_file(root_ + "/sys/module/" + m + "/initstate", "live\n");
  EXPECT_TRUE(host_->module_loaded("nvidia"));
  const Status can = host_->can_unload_nvidia();
  ASSERT_FALSE(can.ok());
  EXPECT_THAT(can.error().message, HasSubstr("kernel was built without module unloading"));
  EXPECT_THAT(can.error().message, HasSubstr("nothing was changed"));
  const Status st = host_->unload_nvidia_modules();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, can.error().message);
  EXPECT_EQ(test::read_file(root_ + "/proc/modules"), test::fake_proc::real_proc_modules());
  EXPECT_TRUE(present("nvidia"));
}

TEST_F(SimHostTest, BuiltInNvidiaCanNeverBeUnloaded) {
  test::write_file(root_ + "/sys/module/nvidia/parameters/NVreg_OpenRmEnableUnsupportedGpus", "1\n");
  EXPECT_FALSE(host_->module_loaded("nvidia"));
  const Status can = host_->can_unload_nvidia();
  ASSERT_FALSE(can.ok());
  EXPECT_THAT(can.error().message, HasSubstr("nvidia is built into the kernel"));
}

TEST_F(SimHostTest, NothingLoadedCanBeUnloaded) {
  EXPECT_TRUE(host_->can_unload_nvidia().ok());
  module("nvidia", 1);
  EXPECT_TRUE(host_->can_unload_nvidia().ok());  // busy is not "never": that is the unload's decision
}

TEST_F(SimHostTest, UnloadWithNothingLoadedSucceeds) {
  EXPECT_TRUE(host_->unload_nvidia_modules().ok());
}

TEST_F(SimHostTest, NouveauRefusedWhileReferencedThenUnloadedAtZero) {
  module("nouveau", 1);
  {
    LogCapture logs;
    const Status st = host_->unload_module("nouveau");
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(st.error().errno_is(EAGAIN)) << "the kernel's EWOULDBLOCK for a module in use";
    EXPECT_THAT(st.error().message, HasSubstr("in use (EAGAIN): nouveau: refcount 1"));
    EXPECT_TRUE(present("nouveau"));
    EXPECT_THAT(logs.text(), HasSubstr("info Unloading nouveau driver"));
  }
  module("nouveau", 0);
  LogCapture logs;
  ASSERT_TRUE(host_->unload_module("nouveau").ok());
  EXPECT_FALSE(present("nouveau"));
  EXPECT_THAT(logs.text(), HasSubstr("info Successfully unloaded nouveau driver"));
}

// delete_module(2)'s order: held by another module (EWOULDBLOCK), then permanent (EBUSY), then referenced.
TEST_F(SimHostTest, RemovalAnswersTheKernelsErrnoInTheKernelsOrder) {
  module("drm", 1, {"nvidia_drm"});
  module("nvidia_drm", 0);
  module("ttm", 0);
  module("video", 3);
  test::write_file(root_ + "/proc/modules",
                   "drm 1 1 nvidia_drm,[permanent], Live 0x0\n"
                   "nvidia_drm 1 0 - Live 0x0\n"
                   "ttm 1 0 [permanent], Live 0x0\n"
                   "video 1 3 [permanent], Live 0x0\n");
  const Status held = host_->unload_module("drm");
  ASSERT_FALSE(held.ok());
  EXPECT_TRUE(held.error().errno_is(EAGAIN));
  EXPECT_THAT(held.error().message,
              HasSubstr("module is in use (EAGAIN): drm: refcount 1, used by nvidia_drm"));
  for (const auto* m : {"ttm", "video"}) {
    const Status st = host_->unload_module(m);
    ASSERT_FALSE(st.ok()) << m;
    EXPECT_TRUE(st.error().errno_is(EBUSY)) << m;
    EXPECT_EQ(st.error().message,
              fmt::format("failed to unload kernel module {}: module is permanent (EBUSY): "
                          "{} has no exit function, the kernel can never unload it",
                          m, m));
    EXPECT_TRUE(present(m));
  }
  EXPECT_THAT(test::read_file(root_ + "/proc/modules"), HasSubstr("ttm 1 0 [permanent], Live"));
}

// A permanent member of the stack (an init function, no exit function) is refused before anything is
// weighed or written, like a built-in one, and never read as a holder's name.
TEST_F(SimHostTest, PermanentNvidiaIsRefusedUpFrontAndNothingIsRemoved) {
  module("nvidia_uvm", 0);
  module("nvidia", 1, {"nvidia_uvm"});
  test::write_file(root_ + "/proc/modules",
                   "nvidia_uvm 1437696 0 - Live 0x0000000000000000 (POE)\n"
                   "nvidia 56537088 1 nvidia_uvm,[permanent], Live 0x0000000000000000 (POE)\n");
  auto st = host_->module_state("nvidia");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(st->permanent);
  EXPECT_THAT(st->holders, ::testing::ElementsAre("nvidia_uvm"));
  const Status can = host_->can_unload_nvidia();
  ASSERT_FALSE(can.ok());
  EXPECT_THAT(can.error().message, HasSubstr("nvidia is permanent"));
  EXPECT_THAT(can.error().message, HasSubstr("can never unload a permanent module without a reboot"));
  EXPECT_THAT(can.error().message, ::testing::Not(HasSubstr("outside the NVIDIA stack")));
  LogCapture logs;
  const Status unload = host_->unload_nvidia_modules();
  ASSERT_FALSE(unload.ok());
  EXPECT_EQ(unload.error().message, can.error().message);
  EXPECT_TRUE(present("nvidia_uvm"));
  EXPECT_TRUE(present("nvidia"));
  EXPECT_THAT(logs.text(), ::testing::Not(HasSubstr("Unloaded kernel module")));
}

// Drivers up to 535 register nvidia's major as nvidia-frontend: its holders are found all the same.
TEST_F(SimHostTest, AHolderOfTheNvidiaFrontendMajorIsNamed) {
  module("nvidia_modeset", 0);
  module("nvidia", 3, {"nvidia_modeset"});
  test::write_file(root_ + "/proc/devices", "Character devices:\n195 nvidia-frontend\n238 nvidia-uvm\n");
  test::fake_proc::make_char_device(root_, "/dev/nvidiactl", 195, 255);
  test::fake_proc::make_process(root_, 4242, "python3", "0::/\n", {{3, "/dev/nvidiactl"}});
  const Status st = host_->unload_nvidia_modules();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message,
              HasSubstr("nvidia: refcount 3, 2 other reference(s), device files open in pid 4242 (python3)"));
  EXPECT_THAT(st.error().message, ::testing::Not(HasSubstr("kernel user")));
}

// A DRM node is attributed through DIR/sys/dev/char/<major>:<minor>/device/driver/module, as on the real
// host: a GPU's card is nvidia_drm's, another driver's card holds nothing of the stack.
TEST_F(SimHostTest, AHolderOfNvidiaDrmsCardIsNamedAndAnotherDriversCardIsNot) {
  module("nvidia_drm", 1);
  module("nvidia_modeset", 1, {"nvidia_drm"});
  module("nvidia", 1, {"nvidia_modeset"});
  test::write_file(root_ + "/proc/devices", "Character devices:\n195 nvidia\n195 nvidiactl\n226 drm\n");
  test::fake_proc::make_drm_node(root_, "card0", 226, 0, "0000:00:02.0", "i915", "i915");
  test::fake_proc::make_drm_node(root_, "card1", 226, 1, "0000:01:00.0", "nvidia", "nvidia");
  test::fake_proc::make_process(root_, 300, "gnome-shell", "0::/\n", {{7, "/dev/dri/card0"}});
  test::fake_proc::make_process(root_, 301, "Xorg", "0::/\n", {{7, "/dev/dri/card1"}});
  const auto holders = host_->nvidia_holder_processes();
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].label(), "pid 301 (Xorg)");
  EXPECT_THAT(holders[0].modules, ::testing::ElementsAre("nvidia_drm"));
  const Status st = host_->unload_nvidia_modules();
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message,
              HasSubstr("nvidia_drm: refcount 1, 1 other reference(s), device files open in pid 301 (Xorg)"));
  EXPECT_TRUE(present("nvidia_drm"));
  EXPECT_TRUE(present("nvidia"));
}

// What no link, pin or open device file explains is said to be that, never "no process has it open".
TEST_F(SimHostTest, AnUnexplainedReferenceIsRefusedSayingWhatExplainsNone) {
  module("nvidia_modeset", 0);
  module("nvidia_uvm", 0);
  module("nvidia", 5, {"nvidia_modeset", "nvidia_uvm"});
  test::fake_proc::write_real_proc_devices(root_);
  const Status st = host_->unload_nvidia_modules();
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.error().errno_is(EAGAIN));
  EXPECT_THAT(st.error().message,
              HasSubstr("nvidia: refcount 5, 3 other reference(s) that no module link, known "
                        "pin or open device file explains (a kernel user)"));
  EXPECT_THAT(st.error().message, ::testing::Not(HasSubstr("no process")));
}

TEST_F(SimHostTest, UnloadingAModuleThatIsNotLoadedFails) {
  const Status st = host_->unload_module("nouveau");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.error().errno_is(ENOENT));
  EXPECT_THAT(st.error().message, HasSubstr("not loaded"));
}

TEST_F(SimHostTest, ProcModulesFileUnderTheRootWinsOverTheSynthesisedOne) {
  module("nvidia", 1, {"nvidia_uvm"});
  module("nvidia_uvm", 0);
  EXPECT_THAT(host_->nvidia_modules_table(), ::testing::ContainsRegex("nvidia +0 +1 +nvidia_uvm\n"));
  EXPECT_FALSE(host_->mofed_ready(Mofed::kHost));
  module("mlx5_core", 0);
  EXPECT_TRUE(host_->mofed_ready(Mofed::kHost));  // synthesised from sys/module

  test::write_file(root_ + "/proc/modules", "nvidia 999 7 - Live 0x0\n");
  EXPECT_THAT(host_->nvidia_modules_table(), ::testing::ContainsRegex("nvidia +999 +7"));
  EXPECT_FALSE(host_->mofed_ready(Mofed::kHost));
}

// The log's table lists the stack's modules, not drm, whose "Used by" names nvidia_drm.
TEST_F(SimHostTest, TheModulesTableLeavesOutModulesThatOnlyNameAnNvidiaHolder) {
  test::write_file(root_ + "/proc/modules",
                   "drm 622592 4 nvidia_drm,drm_kms_helper, Live 0x0\n"
                   "nvidia_drm 126976 2 - Live 0x0\n"
                   "nvidia 56537088 3 nvidia_drm, Live 0x0\n");
  const std::string table = host_->nvidia_modules_table();
  EXPECT_THAT(table, ::testing::StartsWith("Module"));
  EXPECT_THAT(table, ::testing::ContainsRegex("\nnvidia_drm +126976 +2"));
  EXPECT_THAT(table, ::testing::ContainsRegex("\nnvidia +56537088 +3 +nvidia_drm\n"));
  EXPECT_THAT(table, ::testing::Not(::testing::ContainsRegex("\ndrm ")));
}

}  // namespace
}  // namespace dm::host

namespace dm::host {
namespace {

// Read-only checks of the real host's module path (nothing is ever unloaded from the real machine here).
TEST(RealHost, AbsentModuleIsNotLoadedAndHasNoState) {
  auto host = make_host("");
  EXPECT_FALSE(host->module_loaded("dm_test_no_such_module"));
  auto st = host->module_state("dm_test_no_such_module");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_FALSE(st->loaded);
  EXPECT_EQ(st->refcount, 0);
  const Status removed = host->unload_module("dm_test_no_such_module");
  ASSERT_FALSE(removed.ok());
  EXPECT_TRUE(removed.error().errno_is(ENOENT));
  EXPECT_EQ(removed.error().message,
            "failed to unload kernel module dm_test_no_such_module: module is not loaded (ENOENT)");
}

// The real backend's removal is the delete_module(2) system call: with /proc and /sys saying a module is
// loaded and unused, the call goes to the kernel, which does not know the module; the kernel's answer
// (ENOENT as root, EPERM otherwise, ENOSYS in a sandbox without module support: asked here directly) is the
// error, naming the module.
TEST(RealHost, RemovalAsksTheKernelAndReportsItsAnswer) {
  const std::string root = test::make_temp_dir("dm-kernel-backend");
  test::write_file(root + "/proc/modules", "dm_test_no_such_module 16384 0 - Live 0x0000000000000000\n");
  test::write_file(root + "/sys/module/dm_test_no_such_module/refcnt", "0\n");
  std::filesystem::create_directories(root + "/sys/module/dm_test_no_such_module/holders");
  auto backend = make_kernel_backend(root + "/proc", root + "/sys");
  ASSERT_TRUE(backend->loaded("dm_test_no_such_module"));
  ASSERT_NE(syscall(SYS_delete_module, "dm_test_no_such_module", O_NONBLOCK), 0);
  const int kernel_errno = errno;
  const std::string kernel_answer = std::strerror(kernel_errno);
  const Status removed = backend->remove("dm_test_no_such_module");
  ASSERT_FALSE(removed.ok());
  EXPECT_TRUE(removed.error().errno_is(kernel_errno));
  EXPECT_EQ(removed.error().message,
            "failed to unload kernel module dm_test_no_such_module: " + kernel_answer);
  std::filesystem::remove_all(root);
}

// The machine's own /proc and /sys, read-only: the NVIDIA stack's state, the unloadability check and the
// holder scan must work whatever the machine has (this one has no NVIDIA driver).
TEST(RealHost, NvidiaStackChecksReadTheMachineWithoutChangingIt) {
  auto host = make_host("");
  auto st = host->module_state("nvidia");
  ASSERT_TRUE(st.ok()) << st.error().message;
  const auto holders = host->nvidia_holder_processes();
  const Status can = host->can_unload_nvidia();
  if (!st->loaded && !st->builtin) {
    EXPECT_TRUE(can.ok()) << can.error().message;
    EXPECT_THAT(holders, ::testing::IsEmpty());
  }
  EXPECT_THAT(host->nvidia_modules_table(), ::testing::StartsWith("Module"));
}

}  // namespace
}  // namespace dm::host
