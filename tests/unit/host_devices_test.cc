// Holders of the NVIDIA driver found by device number: /proc/devices of a real GPU host (and of a driver up
// to 535, whose major is nvidia-frontend), the open files of a real CUDA process (including
// /dev/nvidia-caps/*) rebuilt as a fake /proc, renamed device paths, DRM nodes attributed through sysfs, and
// a read-only scan of the machine's own /proc.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>

#include "fixtures/host/fake_proc.h"
#include "host/cgroup.h"
#include "host/devices.h"
#include "host/fs_util.h"
#include "support/process.h"

namespace dm::host {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

NvidiaDevices real_devices() {
  return NvidiaDevices::parse(test::fake_proc::reading("proc-devices.txt"));
}

// The real /proc/devices with the DRM major every DRM driver shares (226 drm).
NvidiaDevices real_devices_with_drm() {
  std::string text = test::fake_proc::reading("proc-devices.txt");
  const std::string section = "Character devices:\n";
  text.insert(text.find(section) + section.size(), "226 drm\n");
  return NvidiaDevices::parse(text);
}

TEST(NvidiaDevices, RealProcDevicesMapsEveryNvidiaMajorToItsModule) {
  const auto d = real_devices();
  EXPECT_EQ(d.module_of(makedev(195, 0)), "nvidia");            // /dev/nvidia0
  EXPECT_EQ(d.module_of(makedev(195, 255)), "nvidia");          // /dev/nvidiactl
  EXPECT_EQ(d.module_of(makedev(195, 254)), "nvidia_modeset");  // /dev/nvidia-modeset
  EXPECT_EQ(d.module_of(makedev(238, 0)), "nvidia_uvm");
  EXPECT_EQ(d.module_of(makedev(238, 1)), "nvidia_uvm");  // nvidia-uvm-tools
  EXPECT_EQ(d.module_of(makedev(239, 0)), "nvidia");      // nvidia-nvswitch
  EXPECT_EQ(d.module_of(makedev(240, 0)), "nvidia");      // nvidia-nvlink
  EXPECT_EQ(d.module_of(makedev(241, 1)), "nvidia");      // /dev/nvidia-caps/nvidia-cap1
  EXPECT_EQ(d.module_of(makedev(242, 0)), "nvidia");      // nvidia-caps-imex-channels
  EXPECT_EQ(d.module_of(makedev(1, 3)), "");              // /dev/null
  EXPECT_EQ(d.module_of(makedev(231, 0)), "");            // infiniband, a neighbour of the NVIDIA majors
  EXPECT_EQ(d.module_of(makedev(7, 0)), "");              // loop is a block device major
}

// Drivers up to 535 register nvidia's major as nvidia-frontend (nv-frontend), with no nvidia/nvidiactl line.
TEST(NvidiaDevices, TheNvidiaFrontendMajorOfOlderDriversIsNvidiasWithTheModesetMinor) {
  const auto d = NvidiaDevices::parse(
      "Character devices:\n  1 mem\n195 nvidia-frontend\n226 drm\n236 nvidia-nvlink\n237 nvidia-caps\n"
      "238 nvidia-uvm\n\nBlock devices:\n  7 loop\n");
  EXPECT_FALSE(d.empty());
  EXPECT_EQ(d.module_of(makedev(195, 0)), "nvidia");            // /dev/nvidia0
  EXPECT_EQ(d.module_of(makedev(195, 255)), "nvidia");          // /dev/nvidiactl
  EXPECT_EQ(d.module_of(makedev(195, 254)), "nvidia_modeset");  // /dev/nvidia-modeset
  EXPECT_EQ(d.module_of(makedev(238, 0)), "nvidia_uvm");
  EXPECT_EQ(d.module_of(makedev(237, 1)), "nvidia");
  EXPECT_EQ(d.module_of(makedev(226, 0)), "") << "a DRM node is attributed through sysfs, not by its major";
  EXPECT_TRUE(d.is_drm(makedev(226, 128)));
  EXPECT_FALSE(d.is_drm(makedev(195, 0)));
}

TEST(NvidiaDevices, NoNvidiaDriverMeansNoDevices) {
  const auto d =
      NvidiaDevices::parse("Character devices:\n  1 mem\n 10 misc\n\nBlock devices:\n195 nvidia\n");
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.module_of(makedev(195, 0)), "");
}

class HolderScan : public ::testing::Test {
 protected:
  void SetUp() override { root_ = test::make_temp_dir("dm-holders"); }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(HolderScan, RealCudaProcessHoldsNvidiaAndUvmIncludingThroughTheCapsNodes) {
  const auto made = test::fake_proc::make_real_devices(root_);
  EXPECT_EQ(made.at("/dev/nvidia-caps/nvidia-cap1"), "241:1");
  test::fake_proc::make_real_holder(root_, 448);
  const auto holders = find_holder_processes(root_ + "/proc", root_ + "/sys", real_devices());
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].pid, 448);
  EXPECT_EQ(holders[0].label(), "pid 448 (python3)");
  EXPECT_THAT(holders[0].modules, ElementsAre("nvidia", "nvidia_uvm"));
  EXPECT_EQ(holders[0].pod_uid, "");  // that process was not in a pod
}

TEST_F(HolderScan, AProcessHoldingOnlyACapsNodeHoldsNvidia) {
  test::fake_proc::make_real_devices(root_);
  test::fake_proc::make_process(root_, 7, "imex", "0::/\n", {{3, "/dev/nvidia-caps/nvidia-cap2"}});
  const auto holders = find_holder_processes(root_ + "/proc", root_ + "/sys", real_devices());
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_THAT(holders[0].modules, ElementsAre("nvidia"));
}

TEST_F(HolderScan, DevicesAreRecognisedByNumberNotByPath) {
  // Inside a container the node may have any name; a regular file named like a GPU is no device.
  test::fake_proc::make_char_device(root_, "/ctr/dev/gpu-a", 195, 3);
  test::fake_proc::make_char_device(root_, "/ctr/dev/modeset", 195, 254);
  test::fake_proc::make_char_device(root_, "/dev/null-like", 1, 3);
  test::write_file(root_ + "/dev/nvidia0", "not a device\n");
  const std::string uid = "8f4b3a2e-1c5d-4e6f-9a0b-7c8d9e0f1a2b";
  test::fake_proc::make_process(root_, 300, "trainer",
                                "0::/kubepods.slice/kubepods-burstable.slice/"
                                "kubepods-burstable-pod8f4b3a2e_1c5d_4e6f_9a0b_7c8d9e0f1a2b.slice/"
                                "cri-containerd-abc.scope\n",
                                {{3, "/ctr/dev/gpu-a"}});
  test::fake_proc::make_process(root_, 200, "Xorg", "0::/system.slice/display.service\n",
                                {{1, "/dev/null-like"}, {2, "/ctr/dev/modeset"}});
  test::fake_proc::make_process(root_, 100, "fake", "0::/\n", {{0, "/dev/nvidia0"}, {1, "/dev/null-like"}});
  test::write_file(root_ + "/proc/self", "not a pid\n");
  fs::create_directories(root_ + "/proc/12x/fd");

  const auto holders = find_holder_processes(root_ + "/proc", root_ + "/sys", real_devices());
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].label(), "pid 200 (Xorg)");
  // /dev/nvidia-modeset is opened through nvidia's device: both modules are held.
  EXPECT_THAT(holders[0].modules, ElementsAre("nvidia", "nvidia_modeset"));
  EXPECT_EQ(holders[0].pod_uid, "");
  EXPECT_EQ(holders[1].label(), "pid 300 (trainer)");
  EXPECT_THAT(holders[1].modules, ElementsAre("nvidia"));
  EXPECT_EQ(holders[1].pod_uid, uid);
}

// A process holding /dev/nvidia0 on a driver up to 535 (major nvidia-frontend) is found like any other.
TEST_F(HolderScan, AHolderOfTheNvidiaFrontendMajorIsFound) {
  test::fake_proc::make_char_device(root_, "/dev/nvidia0", 195, 0);
  test::fake_proc::make_char_device(root_, "/dev/nvidia-modeset", 195, 254);
  test::fake_proc::make_process(root_, 51, "Xorg", "0::/\n", {{4, "/dev/nvidia-modeset"}});
  test::fake_proc::make_process(root_, 52, "python3", "0::/\n", {{3, "/dev/nvidia0"}});
  const auto holders = find_holder_processes(
      root_ + "/proc", root_ + "/sys", NvidiaDevices::parse("Character devices:\n195 nvidia-frontend\n"));
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_THAT(holders[0].modules, ElementsAre("nvidia", "nvidia_modeset"));
  EXPECT_THAT(holders[1].modules, ElementsAre("nvidia"));
}

// DRM nodes share one major among all DRM drivers: the driver bound to the node's device (sysfs) decides. A
// GPU's nodes hang off the PCI device that nvidia drives, and are nvidia_drm's; another driver's are not the
// driver's, nor is a node sysfs does not know.
TEST_F(HolderScan, DrmNodesCountOnlyWhenSysfsBindsThemToTheNvidiaStack) {
  test::fake_proc::make_drm_node(root_, "card0", 226, 0, "0000:01:00.0", "nvidia", "nvidia");
  test::fake_proc::make_drm_node(root_, "renderD128", 226, 128, "0000:01:00.0", "nvidia", "nvidia");
  test::fake_proc::make_drm_node(root_, "card1", 226, 1, "0000:00:02.0", "i915", "i915");
  test::fake_proc::make_char_device(root_, "/dev/dri/card2", 226, 2);  // no sysfs entry
  test::fake_proc::make_process(root_, 10, "gnome-shell", "0::/\n", {{5, "/dev/dri/card1"}});
  test::fake_proc::make_process(root_, 11, "Xorg", "0::/\n", {{5, "/dev/dri/card0"}, {6, "/dev/dri/card1"}});
  test::fake_proc::make_process(root_, 12, "vkcube", "0::/\n", {{3, "/dev/dri/renderD128"}});
  test::fake_proc::make_process(root_, 13, "odd", "0::/\n", {{3, "/dev/dri/card2"}});
  const auto holders = find_holder_processes(root_ + "/proc", root_ + "/sys", real_devices_with_drm());
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].label(), "pid 11 (Xorg)");
  EXPECT_THAT(holders[0].modules, ElementsAre("nvidia_drm"));
  EXPECT_EQ(holders[1].label(), "pid 12 (vkcube)");
  EXPECT_THAT(holders[1].modules, ElementsAre("nvidia_drm"));
}

TEST_F(HolderScan, DrmModuleOfReadsTheModuleOfTheDriverBoundToTheNode) {
  test::fake_proc::make_drm_node(root_, "card0", 226, 0, "0000:01:00.0", "nvidia", "nvidia");
  // A node bound straight to nvidia_drm (a platform device of its own) is nvidia_drm's as well.
  test::fake_proc::make_drm_node(root_, "card3", 226, 3, "0000:02:00.0", "nvidia-drm", "nvidia_drm");
  test::fake_proc::make_drm_node(root_, "card1", 226, 1, "0000:00:02.0", "amdgpu", "amdgpu");
  EXPECT_EQ(drm_module_of(root_ + "/sys", makedev(226, 0)), "nvidia_drm");
  EXPECT_EQ(drm_module_of(root_ + "/sys", makedev(226, 3)), "nvidia_drm");
  EXPECT_EQ(drm_module_of(root_ + "/sys", makedev(226, 1)), "");
  EXPECT_EQ(drm_module_of(root_ + "/sys", makedev(226, 9)), "");
}

TEST_F(HolderScan, WithoutNvidiaMajorsNothingIsScanned) {
  test::fake_proc::make_real_devices(root_);
  test::fake_proc::make_real_holder(root_, 448);
  EXPECT_THAT(find_holder_processes(root_ + "/proc", root_ + "/sys",
                                    NvidiaDevices::parse("Character devices:\n  1 mem\n")),
              IsEmpty());
}

// The machine's own /proc, read-only. It has no NVIDIA driver, so /dev/null's major stands in for one: the
// scan must find this very process through the kernel's /proc/<pid>/fd links.
TEST(RealProc, OwnProcessIsFoundByTheDeviceNumberOfAnOpenFile) {
  const auto real = read_text_file("/proc/devices");
  ASSERT_TRUE(real.ok()) << real.error().message;
  const auto devices = NvidiaDevices::parse(*real);
  const auto found = find_holder_processes("/proc", "/sys", devices);
  if (devices.empty()) {
    EXPECT_THAT(found, IsEmpty());  // no NVIDIA driver: nothing can hold it
  }

  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const auto holders =
      find_holder_processes("/proc", "/sys", NvidiaDevices::parse("Character devices:\n  1 nvidia\n"));
  ::close(fd);
  const auto self =
      std::find_if(holders.begin(), holders.end(), [](const auto& h) { return h.pid == ::getpid(); });
  ASSERT_NE(self, holders.end());
  EXPECT_THAT(self->modules, ElementsAre("nvidia"));
  auto comm = read_text_file("/proc/self/comm");
  ASSERT_TRUE(comm.ok());
  EXPECT_EQ(self->comm, std::string(trim(*comm)));
  auto cgroup = read_text_file("/proc/self/cgroup");
  ASSERT_TRUE(cgroup.ok());
  EXPECT_EQ(self->pod_uid, pod_uid_from_cgroup(*cgroup).value_or(""));
}

}  // namespace
}  // namespace dm::host
