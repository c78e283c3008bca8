// The kernel-module rules: the all-or-nothing unload decision, the blocker messages, the /proc/modules table
// and the /proc scan that names the processes holding the NVIDIA device nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

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

TEST(UnloadPlan, FreeStackIsRemovedHoldersFirstWithNvidiaDrmFirst) {
  const auto plan =
      plan_nvidia_unload({mod("nvidia_drm", 0), mod("nvidia_modeset", 1, {"nvidia_drm"}),
                          mod("nvidia_uvm", 0), mod("nvidia", 2, {"nvidia_modeset", "nvidia_uvm"})});
  ASSERT_TRUE(plan.allowed());
  EXPECT_THAT(plan.order, ElementsAre("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"));
}

TEST(UnloadPlan, ModuleOrderFollowsKNvidiaModules) {
  std::vector<ModuleState> loaded;
  for (const auto name : kNvidiaModules) loaded.push_back(mod(std::string(name), 0));
  const auto plan = plan_nvidia_unload(loaded);
  ASSERT_TRUE(plan.allowed());
  EXPECT_THAT(plan.order, ElementsAre("nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia_peermem",
                                      "nvidia_fs", "nvidia_vgpu_vfio", "gdrdrv", "nvidia"));
}

TEST(UnloadPlan, BusyNvidiaBlocksEverythingAndNamesTheUsers) {
  const auto plan = plan_nvidia_unload({mod("nvidia_modeset", 0), mod("nvidia_uvm", 0),
                                        mod("nvidia", 3, {"nvidia_modeset"}, {"ns/a", "ns/b"})});
  EXPECT_FALSE(plan.allowed());
  EXPECT_THAT(plan.order, IsEmpty());
  EXPECT_THAT(plan.blockers, ElementsAre("nvidia: refcount 3, used by 2 process(es)/pod(s): ns/a, ns/b"));
}

TEST(UnloadPlan, HolderOutsideTheStackBlocks) {
  const auto plan =
      plan_nvidia_unload({mod("nvidia_uvm", 0), mod("nvidia", 2, {"nvidia_uvm", "ib_core_peer"})});
  EXPECT_FALSE(plan.allowed());
  EXPECT_THAT(plan.blockers,
              ElementsAre("nvidia: refcount 2, held by module(s) outside the NVIDIA stack: ib_core_peer"));
}

TEST(UnloadPlan, UnidentifiedReferencesAreCountedAndEveryBusyModuleIsListed) {
  const auto plan =
      plan_nvidia_unload({mod("nvidia_uvm", 1), mod("nvidia", 2, {"nvidia_uvm"}, {"pid 7 (x)"})});
  EXPECT_FALSE(plan.allowed());
  EXPECT_THAT(plan.blockers,
              ElementsAre("nvidia_uvm: refcount 1, used by 1 process(es)/pod(s) (not identified)",
                          "nvidia: refcount 2, used by 1 process(es)/pod(s): pid 7 (x)"));
}

TEST(UnloadPlan, AHolderListedAfterTheModuleItHoldsIsMovedBeforeIt) {
  // gdrdrv holding nvidia_uvm is not a real-world case, but the order must still respect holders.
  const auto plan = plan_nvidia_unload(
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

TEST(ProcessesUsingModule, FindsOpenNvidiaDeviceNodesPerModule) {
  namespace fs = std::filesystem;
  const std::string proc = test::make_temp_dir("dm-host-proc");
  const auto fd = [&](const std::string& pid, const std::string& n, const std::string& target) {
    fs::create_directories(proc + "/" + pid + "/fd");
    fs::create_symlink(target, proc + "/" + pid + "/fd/" + n);
  };
  fd("100", "3", "/dev/nvidia0");
  fd("100", "4", "/dev/nvidiactl");
  test::write_file(proc + "/100/comm", "python3\n");
  fd("200", "1", "/dev/null");
  fd("200", "2", "/dev/nvidia-modeset");
  test::write_file(proc + "/200/comm", "Xorg\n");
  fd("300", "5", "/dev/nvidia-uvm");
  test::write_file(proc + "/300/comm", "cuda-app\n");
  fd("400", "0", "/dev/nvidia-fake");  // not a GPU node: "nvidia" + non-digits
  test::write_file(proc + "/self", "not a pid\n");

  EXPECT_THAT(processes_using_module(proc, "nvidia"), ElementsAre("pid 100 (python3)"));
  EXPECT_THAT(processes_using_module(proc, "nvidia_uvm"), ElementsAre("pid 300 (cuda-app)"));
  EXPECT_THAT(processes_using_module(proc, "nvidia_modeset"), ElementsAre("pid 200 (Xorg)"));
  EXPECT_THAT(processes_using_module(proc, "gdrdrv"), IsEmpty());
  fs::remove_all(proc);
}

}  // namespace
}  // namespace dm::host
