// The kernel-module rules: the all-or-nothing unload decision (with vGPU pins), the blocker messages, the
// /proc/modules table, and reading a module's state - including a real kernel without module unloading.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "fixtures/host/fake_proc.h"
#include "host/modules.h"
#include "support/process.h"

namespace dm::host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ModuleState mod(std::string name, int refs, std::vector<std::string> holders = {},
                std::vector<std::string> users = {}) {
  ModuleState m;
  m.name = std::move(name);
  m.loaded = true;
  m.refcount = refs;
  m.holders = std::move(holders);
  m.users = std::move(users);
  return m;
}

TEST(UnloadDecision, FreeStackIsRemovedHoldersFirstWithNvidiaDrmFirst) {
  const auto plan =
      decide_nvidia_unload({mod("nvidia_drm", 0), mod("nvidia_modeset", 1, {"nvidia_drm"}),
                            mod("nvidia_uvm", 0), mod("nvidia", 2, {"nvidia_modeset", "nvidia_uvm"})});
  ASSERT_TRUE(plan.allowed());
  EXPECT_THAT(plan.order, ElementsAre("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"));
}

TEST(UnloadDecision, ModuleOrderFollowsKNvidiaModules) {
  std::vector<ModuleState> loaded;
  for (const auto name : kNvidiaModules) loaded.push_back(mod(std::string(name), 0));
  const auto plan = decide_nvidia_unload(loaded);
  ASSERT_TRUE(plan.allowed());
  EXPECT_THAT(plan.order, ElementsAre("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia_peermem",
                                      "nvidia_fs", "nvidia_vgpu_vfio", "gdrdrv", "nvidia"));
}

TEST(UnloadDecision, BusyNvidiaBlocksEverythingAndNamesTheProcesses) {
  const auto plan = decide_nvidia_unload({mod("nvidia_modeset", 0), mod("nvidia_uvm", 0),
                                          mod("nvidia", 3, {"nvidia_modeset"}, {"pid 4 (a)", "pid 5 (b)"})});
  EXPECT_FALSE(plan.allowed());
  EXPECT_THAT(plan.order, IsEmpty());
  EXPECT_THAT(
      plan.blockers,
      ElementsAre("nvidia: refcount 3, 2 other reference(s), device files open in pid 4 (a), pid 5 (b)"));
}

TEST(UnloadDecision, HolderOutsideTheStackBlocks) {
  const auto plan =
      decide_nvidia_unload({mod("nvidia_uvm", 0), mod("nvidia", 2, {"nvidia_uvm", "ib_core_peer"})});
  EXPECT_FALSE(plan.allowed());
  EXPECT_THAT(plan.blockers,
              ElementsAre("nvidia: refcount 2, held by module(s) outside the NVIDIA stack: ib_core_peer"));
}

TEST(UnloadDecision, UnidentifiedReferencesAreCountedAndEveryBusyModuleIsListed) {
  const auto plan =
      decide_nvidia_unload({mod("nvidia_uvm", 1), mod("nvidia", 2, {"nvidia_uvm"}, {"pid 7 (x)"})});
  EXPECT_FALSE(plan.allowed());
  EXPECT_THAT(
      plan.blockers,
      ElementsAre("nvidia_uvm: refcount 1, 1 other reference(s) (no process has its device files open: "
                  "a kernel user)",
                  "nvidia: refcount 2, 1 other reference(s), device files open in pid 7 (x)"));
}

TEST(UnloadDecision, AnOpenDeviceFileBlocksEvenWhenTheCountLooksFree) {
  // The refcount was read before the process opened the device: the scan still refuses.
  const auto plan = decide_nvidia_unload({mod("nvidia", 0, {}, {"pid 9 (nvidia-smi)"})});
  EXPECT_FALSE(plan.allowed());
  EXPECT_THAT(plan.blockers, ElementsAre("nvidia: refcount 0, device files open in pid 9 (nvidia-smi)"));
}

TEST(UnloadDecision, VgpuStackPinningNvidiaWithoutAHoldersLinkIsRemovedVgpuFirst) {
  // A vGPU host: "Used by" of nvidia is empty, yet nvidia_vgpu_vfio holds two references on it.
  const auto plan = decide_nvidia_unload({mod("nvidia_vgpu_vfio", 0), mod("nvidia", 2)});
  ASSERT_TRUE(plan.allowed()) << plan.blockers.front();
  EXPECT_THAT(plan.order, ElementsAre("nvidia_vgpu_vfio", "nvidia"));
  // With a link as well, the link is one of the two pins.
  const auto linked =
      decide_nvidia_unload({mod("nvidia_vgpu_vfio", 0), mod("nvidia", 2, {"nvidia_vgpu_vfio"})});
  EXPECT_TRUE(linked.allowed());
}

TEST(UnloadDecision, VgpuPinsDoNotExcuseOtherUsers) {
  EXPECT_THAT(decide_nvidia_unload({mod("nvidia_vgpu_vfio", 0), mod("nvidia", 3)}).blockers,
              ElementsAre(HasSubstr("nvidia: refcount 3, 1 other reference(s)")));
  EXPECT_THAT(
      decide_nvidia_unload({mod("nvidia_vgpu_vfio", 0), mod("nvidia", 2, {}, {"pid 3 (qemu)"})}).blockers,
      ElementsAre("nvidia: refcount 2, device files open in pid 3 (qemu)"));
  // Without nvidia_vgpu_vfio loaded the two references are unexplained.
  EXPECT_FALSE(decide_nvidia_unload({mod("nvidia", 2)}).allowed());
}

TEST(UnloadDecision, AHolderListedAfterTheModuleItHoldsIsMovedBeforeIt) {
  // gdrdrv holding nvidia_uvm is not a real-world case, but the order must still respect holders.
  const auto plan = decide_nvidia_unload(
      {mod("nvidia_uvm", 1, {"gdrdrv"}), mod("gdrdrv", 0), mod("nvidia", 1, {"nvidia_uvm"})});
  ASSERT_TRUE(plan.allowed());
  EXPECT_THAT(plan.order, ElementsAre("gdrdrv", "nvidia_uvm", "nvidia"));
}

TEST(ModulesTable, HeaderAndNvidiaRowsOnly) {
  const std::string proc =
      "nvidia_uvm 1437696 0 - Live 0x0000000000000000\n"
      "nvidia_drm 77824 2 - Live 0x0000000000000000\n"
      "ext4 1003520 1 - Live 0x0000000000000000\n"
      "nvidia 56537088 10 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n";
  const std::string table = format_modules_table(proc);
  EXPECT_THAT(table.substr(0, table.find('\n')), ::testing::MatchesRegex("Module +Size +Ref Count +Used by"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("ext4")));
  EXPECT_THAT(table, ::testing::ContainsRegex("nvidia +56537088 +10 +nvidia_uvm,nvidia_modeset\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex("nvidia_uvm +1437696 +0 *\n"));
  EXPECT_THAT(table, HasSubstr("nvidia_drm"));
}

TEST(ModulesTable, SimulatedLineHasProcModulesShape) {
  EXPECT_EQ(proc_modules_line(mod("nvidia", 2, {"nvidia_modeset", "nvidia_uvm"})),
            "nvidia 0 2 nvidia_modeset,nvidia_uvm, Live 0x0000000000000000\n");
  EXPECT_EQ(proc_modules_line(mod("nvidia_uvm", 0)), "nvidia_uvm 0 0 - Live 0x0000000000000000\n");
}

TEST(ModuleStateReader, RealKernelWithoutModuleUnloadingIsLoadedButCannotUnload) {
  namespace fs = std::filesystem;
  const std::string sys = test::make_temp_dir("dm-host-sys");
  // As on the real host: the module directories exist (with initstate), refcnt does not.
  for (const auto* m : {"nvidia", "nvidia_uvm"}) test::write_file(sys + "/" + m + "/initstate", "live\n");
  const std::string proc = test::fake_proc::real_proc_modules();
  ASSERT_THAT(proc, HasSubstr("nvidia 14299136 - - Live"));

  auto nvidia = read_module_state(proc, sys, "nvidia");
  ASSERT_TRUE(nvidia.ok()) << nvidia.error().message;
  EXPECT_TRUE(nvidia->loaded);
  EXPECT_FALSE(nvidia->builtin);
  EXPECT_FALSE(nvidia->unloadable);
  EXPECT_THAT(nvidia->holders, IsEmpty());
  auto uvm = read_module_state(proc, sys, "nvidia_uvm");
  ASSERT_TRUE(uvm.ok());
  EXPECT_TRUE(uvm->loaded);
  auto modeset = read_module_state(proc, sys, "nvidia_modeset");
  ASSERT_TRUE(modeset.ok());
  EXPECT_FALSE(modeset->loaded);
  EXPECT_FALSE(modeset->builtin);

  const Status never = check_stack_unloadable({*uvm, *nvidia});
  ASSERT_FALSE(never.ok());
  EXPECT_THAT(never.error().message,
              HasSubstr("nvidia_uvm, nvidia are loaded, but the kernel was built without "
                        "module unloading"));
  EXPECT_THAT(never.error().message, HasSubstr("reboot the node"));
  // /proc/modules alone (no /sys) is enough to know the module is loaded.
  auto bare = read_module_state(proc, sys + "/none", "nvidia");
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->loaded);
  EXPECT_FALSE(bare->unloadable);
  fs::remove_all(sys);
}

TEST(ModuleStateReader, CountsAndHoldersFromProcModulesWhenSysHasNone) {
  const std::string proc = "nvidia 56537088 2 nvidia_uvm,nvidia_modeset, Live 0x0 (POE)\n";
  auto st = read_module_state(proc, "/nonexistent-sys", "nvidia");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->loaded);
  EXPECT_TRUE(st->unloadable);
  EXPECT_EQ(st->refcount, 2);
  EXPECT_THAT(st->holders, ElementsAre("nvidia_uvm", "nvidia_modeset"));
}

TEST(ModuleStateReader, BuiltInNvidiaIsNotLoadedAndCanNeverBeUnloaded) {
  namespace fs = std::filesystem;
  const std::string sys = test::make_temp_dir("dm-host-sys");
  test::write_file(sys + "/nvidia/parameters/NVreg_EnableGpuFirmware", "18\n");  // built in: no initstate
  auto st = read_module_state("", sys, "nvidia");
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->loaded);
  EXPECT_TRUE(st->builtin);
  const Status never = check_stack_unloadable({*st});
  ASSERT_FALSE(never.ok());
  EXPECT_THAT(never.error().message, HasSubstr("nvidia is built into the kernel"));
  fs::remove_all(sys);
}

TEST(ModuleStateReader, MalformedCountsAreErrorsNamingTheSource) {
  auto st = read_module_state("nvidia 1 lots - Live 0x0\n", "/nonexistent-sys", "nvidia");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("lots"));
  EXPECT_THAT(st.error().message, HasSubstr("/proc/modules"));
}

}  // namespace
}  // namespace dm::host
