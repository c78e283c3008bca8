// The kernel-module rules: the all-or-nothing unload decision (with vGPU pins), the blocker messages, the
// /proc/modules table, and reading a module's state - including a real kernel without module unloading and a
// permanent module.
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
      ElementsAre("nvidia_uvm: refcount 1, 1 other reference(s) that no module link, known pin or open "
                  "device file explains (a kernel user)",
                  "nvidia: refcount 2, 1 other reference(s), device files open in pid 7 (x)"));
}

// The references nothing explains are said to be no link, pin or open device file - not that no process has
// the device files open, which a scan of known device numbers cannot promise.
TEST(UnloadDecision, AnUnexplainedExtraReferenceOnNvidiaIsRefusedSayingWhatExplainsNone) {
  const auto plan = decide_nvidia_unload(
      {mod("nvidia_modeset", 0), mod("nvidia_uvm", 0), mod("nvidia", 5, {"nvidia_modeset", "nvidia_uvm"})});
  EXPECT_FALSE(plan.allowed());
  EXPECT_THAT(plan.blockers,
              ElementsAre("nvidia: refcount 5, 3 other reference(s) that no module link, known "
                          "pin or open device file explains (a kernel user)"));
  EXPECT_THAT(plan.blockers.front(), ::testing::Not(HasSubstr("no process")));
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

// drm's "Used by" names nvidia_drm, and a module of the stack need not be named after nvidia (gdrdrv): the
// table goes by the module's own name.
TEST(ModulesTable, RowsAreTheModulesOfTheStackOrNamedAfterNvidiaNotThoseThatMerelyMentionOne) {
  const std::string proc =
      "nvidia_drm 126976 4 - Live 0x0000000000000000 (POE)\n"
      "drm_kms_helper 311296 1 nvidia_drm, Live 0x0000000000000000\n"
      "drm 622592 8 nvidia_drm,drm_kms_helper, Live 0x0000000000000000\n"
      "gdrdrv 24576 0 - Live 0x0000000000000000 (OE)\n"
      "nvidia_peermem 16384 0 - Live 0x0000000000000000 (POE)\n"
      "nvidia 56537088 10 nvidia_peermem,gdrdrv,[permanent], Live 0x0000000000000000 (POE)\n";
  const std::string table = format_modules_table(proc);
  EXPECT_THAT(table.substr(0, table.find('\n')), ::testing::MatchesRegex("Module +Size +Ref Count +Used by"));
  EXPECT_THAT(table, ::testing::ContainsRegex("\nnvidia_drm +126976 +4 *\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex("\ngdrdrv +24576 +0 *\n"));
  EXPECT_THAT(table, ::testing::ContainsRegex("\nnvidia_peermem +16384"));
  EXPECT_THAT(table,
              ::testing::ContainsRegex("\nnvidia +56537088 +10 +nvidia_peermem,gdrdrv,\\[permanent\\]\n"));
  EXPECT_THAT(table, ::testing::Not(HasSubstr("drm_kms_helper")));
  EXPECT_THAT(table, ::testing::Not(::testing::ContainsRegex("\ndrm ")));
}

TEST(ModulesTable, SimulatedLineHasProcModulesShape) {
  EXPECT_EQ(proc_modules_line(mod("nvidia", 2, {"nvidia_modeset", "nvidia_uvm"})),
            "nvidia 0 2 nvidia_modeset,nvidia_uvm, Live 0x0000000000000000\n");
  EXPECT_EQ(proc_modules_line(mod("nvidia_uvm", 0)), "nvidia_uvm 0 0 - Live 0x0000000000000000\n");
  ModuleState permanent = mod("nvidia", 1, {"nvidia_uvm"});
  permanent.permanent = true;
  EXPECT_EQ(proc_modules_line(permanent), "nvidia 0 1 nvidia_uvm,[permanent], Live 0x0000000000000000\n");
  permanent.holders.clear();
  EXPECT_EQ(proc_modules_line(permanent), "nvidia 0 1 [permanent], Live 0x0000000000000000\n");
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

// The kernel prints "[permanent]," among the holders of a module with an init and no exit function
// (kernel/module/procfs.c): it says what the module is, it names no holder.
TEST(ModuleStateReader, PermanentInProcModulesIsNoHolderButAModuleThatCanNeverBeUnloaded) {
  auto alone =
      read_module_state("nvidia 56537088 0 [permanent], Live 0x0 (POE)\n", "/nonexistent-sys", "nvidia");
  ASSERT_TRUE(alone.ok()) << alone.error().message;
  EXPECT_TRUE(alone->loaded);
  EXPECT_TRUE(alone->permanent);
  EXPECT_TRUE(alone->unloadable) << "the kernel keeps its count; it just has no exit to call";
  EXPECT_THAT(alone->holders, IsEmpty());

  auto held = read_module_state("nvidia 56537088 2 nvidia_uvm,nvidia_modeset,[permanent], Live 0x0 (POE)\n",
                                "/nonexistent-sys", "nvidia");
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE(held->permanent);
  EXPECT_THAT(held->holders, ElementsAre("nvidia_uvm", "nvidia_modeset"));

  auto plain = read_module_state("nvidia 56537088 0 - Live 0x0 (POE)\n", "/nonexistent-sys", "nvidia");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->permanent);

  // Refused up front like a built-in module, before any reference is weighed.
  ModuleState uvm = mod("nvidia_uvm", 0);
  const Status never = check_stack_unloadable({uvm, *alone});
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(
      never.error().message,
      "the NVIDIA driver cannot be unloaded on this node: nvidia is permanent (/proc/modules says "
      "\"[permanent]\": loaded with an init function and no exit function), and the kernel can never "
      "unload a permanent module without a reboot; reboot the node without the NVIDIA driver loaded (or "
      "with a driver whose modules can be unloaded), then retry (nothing was changed)");
  EXPECT_THAT(never.error().message, ::testing::Not(HasSubstr("held by")));
}

// The holders directory of /sys wins for the names; "[permanent]" still comes from /proc/modules.
TEST(ModuleStateReader, PermanentIsReadFromProcModulesEvenWhenSysNamesTheHolders) {
  namespace fs = std::filesystem;
  const std::string sys = test::make_temp_dir("dm-host-sys");
  test::write_file(sys + "/nvidia/refcnt", "1\n");
  fs::create_directories(sys + "/nvidia/holders");
  fs::create_symlink("../../nvidia_uvm", sys + "/nvidia/holders/nvidia_uvm");
  auto st = read_module_state("nvidia 1 1 nvidia_uvm,[permanent], Live 0x0\n", sys, "nvidia");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(st->permanent);
  EXPECT_THAT(st->holders, ElementsAre("nvidia_uvm"));
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
