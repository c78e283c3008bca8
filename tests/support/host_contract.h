// The contract of the host seam (dm::host::Host, src/host/host.h) as driver-manager relies on it: one typed
// test suite run against the simulated host (tests/unit/host_contract_sim_test.cc, label `unit`) and against
// a real Linux kernel with the NVIDIA stub modules inside the test guest
// (tests/kernel/host_contract_kernel.cc, ctest `kernel.host_contract`, label `kernel`): what the simulation
// shows is what the kernel shows. docs/host-contract.md lists the cases and what each proves on each side.
//
// A backend is a class with
//   static void SetUpTestSuite()                    once per suite (the kernel's prints its release)
//   static std::unique_ptr<HostScenario> make()     a fresh node for one case (support/host_scenario.h)
//
// The kernel runs every case in one guest, in the order registered below: the case that loads a
// [permanent] module, which no kernel ever unloads, is the last one.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "host/host.h"
#include "support/doubles.h"
#include "support/host_scenario.h"

namespace dm::test::host_contract {

// The whole NVIDIA stack and the kernel's drm, in load order.
inline const std::vector<std::string> kFullStack = {"nvidia",    "nvidia_uvm", "nvidia_modeset",
                                                    "drm",       "nvidia_drm", "nvidia_peermem",
                                                    "nvidia_fs", "gdrdrv",     "nvidia_vgpu_vfio"};
inline const std::vector<std::string> kDisplayStack = {"nvidia", "nvidia_uvm", "nvidia_modeset", "drm",
                                                       "nvidia_drm"};
inline const std::string kPodUid = "8f4b3a2e-1c5d-4e6f-9a0b-7c8d9e0f1a2b";
inline const std::string kContainer = "4b1f0c9d2e3a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c";

// A device file, who holds it in a case, and the modules the holder scan must attribute it to: those its
// open file takes a reference on (/dev/nvidia-modeset is a minor of nvidia's device served by
// nvidia_modeset, so it holds both, as the kernel's refcounts show).
struct DeviceCase {
  std::string path;
  std::string comm;
  std::vector<std::string> modules;
};
inline const std::vector<DeviceCase> kEveryDevice = {
    {"/dev/nvidia0", "gpu-holder", {"nvidia"}},
    {"/dev/nvidiactl", "ctl-holder", {"nvidia"}},
    {"/dev/nvidia-uvm", "uvm-holder", {"nvidia_uvm"}},
    {"/dev/nvidia-modeset", "modeset-holder", {"nvidia", "nvidia_modeset"}},
    {"/dev/dri/card0", "drm-holder", {"nvidia_drm"}},
    {"/dev/dri/renderD128", "render-holder", {"nvidia_drm"}},
    {"/dev/nvidia-caps/nvidia-cap1", "cap-holder", {"nvidia"}},
    {"/dev/nvidia-caps-imex-channels/channel0", "imex-holder", {"nvidia"}},
};

template <class Backend>
class HostContract : public ::testing::Test {
 public:
  static void SetUpTestSuite() { Backend::SetUpTestSuite(); }

 protected:
  void SetUp() override { scenario_ = Backend::make(); }
  void TearDown() override { scenario_.reset(); }

  HostScenario& node() { return *scenario_; }
  host::Host& host() { return scenario_->host(); }

  // Whether the kernel's /proc/modules lists `module` now.
  bool listed(const std::string& module) {
    const auto names = module_names(node().proc_modules());
    return std::find(names.begin(), names.end(), module) != names.end();
  }
  void expect_all_listed(const std::vector<std::string>& modules) {
    for (const auto& m : modules) {
      EXPECT_TRUE(listed(m)) << m << " is gone from /proc/modules:\n" << node().proc_modules();
      EXPECT_TRUE(host().module_loaded(m)) << m;
    }
  }
  void expect_none_listed(const std::vector<std::string>& modules) {
    for (const auto& m : modules)
      EXPECT_FALSE(listed(m)) << m << " is still loaded:\n" << node().proc_modules();
  }
  // The modules of the log's "Unloaded kernel module <m>" lines, in order.
  static std::vector<std::string> unloaded_in(const std::string& log) {
    return after_prefix(log, "info Unloaded kernel module ");
  }
  static std::vector<std::string> after_prefix(const std::string& log, const std::string& prefix) {
    std::vector<std::string> out;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
    }
    return out;
  }
  std::optional<host::HolderProcess> holder_found(int pid) {
    for (auto& p : host().nvidia_holder_processes()) {
      if (p.pid == pid) return p;
    }
    return std::nullopt;
  }

  // Every device file of the stack held by a process of its own, the stack loaded with `options`: each
  // process is found and attributed to the module serving its file.
  void expect_every_device_attributed(const LoadOptions& options) {
    node().load(kDisplayStack, options);
    const std::string devices = read_text(host().path("/proc/devices"));
    EXPECT_THAT(devices, ::testing::HasSubstr(options.frontend ? "195 nvidia-frontend\n" : "195 nvidia\n"));
    std::vector<Holder> holders;
    for (const auto& d : kEveryDevice) holders.push_back(node().start_holder(d.comm, {d.path}));
    const auto found = host().nvidia_holder_processes();
    for (size_t i = 0; i < kEveryDevice.size(); ++i) {
      SCOPED_TRACE(kEveryDevice[i].path);
      const auto p =
          std::find_if(found.begin(), found.end(), [&](const auto& f) { return f.pid == holders[i].pid; });
      ASSERT_NE(p, found.end()) << holders[i].label() << " holding " << kEveryDevice[i].path
                                << " was not found";
      EXPECT_EQ(p->comm, holders[i].comm);
      EXPECT_EQ(p->pod_uid, "");
      EXPECT_EQ(p->modules, kEveryDevice[i].modules);
    }
    EXPECT_EQ(found.size(), kEveryDevice.size());
  }

  std::unique_ptr<HostScenario> scenario_;
};

TYPED_TEST_SUITE_P(HostContract);

// The whole stack unloads, each module after every module that holds it, and the kernel lists none of it.
TYPED_TEST_P(HostContract, CleanStackUnloadsHoldersFirstAndLeavesNoneLoaded) {
  this->node().load(kFullStack);
  // The links the order follows are the kernel's: each module shows among its dependencies' holders.
  for (const auto& m : kFullStack) {
    for (const auto& dep : dependencies_of(m)) {
      auto st = this->host().module_state(dep);
      ASSERT_TRUE(st) << st.error().message;
      EXPECT_THAT(st->holders, ::testing::Contains(m)) << dep;
    }
  }
  LogCapture logs;
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_TRUE(st) << st.error().message << "\n" << logs.text();
  this->expect_none_listed({std::begin(host::kNvidiaModules), std::end(host::kNvidiaModules)});
  EXPECT_EQ(logs.text().rfind("info Unloading NVIDIA driver kernel modules", 0), 0U) << logs.text();
  const auto order = this->unloaded_in(logs.text());
  EXPECT_THAT(order, ::testing::UnorderedElementsAreArray(host::kNvidiaModules)) << logs.text();
  for (size_t i = 0; i < order.size(); ++i) {
    for (const auto& dep : dependencies_of(order[i])) {
      const auto at = std::find(order.begin(), order.end(), dep);
      if (at != order.end()) {
        EXPECT_LT(i, static_cast<size_t>(at - order.begin())) << order[i] << " after " << dep;
      }
    }
  }
}

// A process of a pod holding /dev/nvidia0: nothing is removed, and the refusal names the process; the holder
// scan gives its pid, name and pod.
TYPED_TEST_P(HostContract, DeviceFileHolderRefusesTheUnloadBeforeAnythingIsRemoved) {
  const std::vector<std::string> stack = {"nvidia", "nvidia_uvm", "nvidia_modeset"};
  this->node().load(stack);
  const Holder h = this->node().start_holder("cuda-app", {"/dev/nvidia0"}, systemd_pod(kPodUid, kContainer));
  LogCapture logs;
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_FALSE(st);
  EXPECT_TRUE(st.error().errno_is(EAGAIN)) << "errno " << st.error().sys_errno;
  EXPECT_THAT(st.error().message, ::testing::HasSubstr(h.label()));
  this->expect_all_listed(stack);
  EXPECT_THAT(logs.text(), ::testing::Not(::testing::HasSubstr("Unloaded kernel module")));
  const auto found = this->holder_found(h.pid);
  ASSERT_TRUE(found) << h.label() << " was not found";
  EXPECT_EQ(found->comm, "cuda-app");
  EXPECT_EQ(found->pod_uid, kPodUid);
  EXPECT_THAT(found->modules, ::testing::ElementsAre("nvidia"));
}

// After a refusal the holder leaves: the next unload goes through.
TYPED_TEST_P(HostContract, HolderLeavingAfterARefusalLetsTheUnloadThrough) {
  const std::vector<std::string> stack = {"nvidia", "nvidia_uvm"};
  this->node().load(stack);
  const Holder h = this->node().start_holder("trainer", {"/dev/nvidia-uvm", "/dev/nvidia0"},
                                             cgroupfs_pod(kPodUid, kContainer));
  const Status refused = this->host().unload_nvidia_modules();
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message, ::testing::HasSubstr(h.label()));
  this->expect_all_listed(stack);
  const auto found = this->holder_found(h.pid);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->pod_uid, kPodUid);
  EXPECT_THAT(found->modules, ::testing::ElementsAre("nvidia", "nvidia_uvm"));

  this->node().stop_holder(h);
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_TRUE(st) << st.error().message;
  this->expect_none_listed(stack);
}

// A module outside the stack that depends on nvidia: refused, naming it, nothing removed.
TYPED_TEST_P(HostContract, ModuleOutsideTheStackHoldingNvidiaIsNamed) {
  const std::vector<std::string> loaded = {"nvidia", "nvidia_uvm", "gpu_mon"};
  this->node().load(loaded);
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_FALSE(st);
  EXPECT_TRUE(st.error().errno_is(EAGAIN)) << "errno " << st.error().sys_errno;
  EXPECT_THAT(st.error().message, ::testing::HasSubstr("gpu_mon"));
  this->expect_all_listed(loaded);
}

// A process holding /dev/nvidia-modeset (nvidia's major, forwarded to nvidia_modeset) is found and
// attributed to both modules its open file holds; the refusal names it, and does not put the reference that
// file takes on nvidia on a kernel user.
TYPED_TEST_P(HostContract, ModesetHeldThroughItsDeviceFileIsTheProcesssNotAKernelUsers) {
  const std::vector<std::string> stack = {"nvidia", "nvidia_modeset"};
  this->node().load(stack);
  const Holder h = this->node().start_holder("Xorg", {"/dev/nvidia-modeset"});
  const auto found = this->holder_found(h.pid);
  ASSERT_TRUE(found) << h.label() << " was not found";
  EXPECT_THAT(found->modules, ::testing::ElementsAre("nvidia", "nvidia_modeset"));
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_FALSE(st);
  EXPECT_THAT(st.error().message, ::testing::HasSubstr("nvidia_modeset"));
  EXPECT_THAT(st.error().message, ::testing::HasSubstr(h.label()));
  EXPECT_THAT(st.error().message, ::testing::Not(::testing::HasSubstr("kernel user")));
  this->expect_all_listed(stack);
}

// nvidia_vgpu_vfio holds nvidia twice, once without a holders link: a known pin, so the unload goes through.
TYPED_TEST_P(HostContract, VgpuPinIsAKnownReference) {
  this->node().load({"nvidia", "nvidia_vgpu_vfio"});
  auto nvidia = this->host().module_state("nvidia");
  ASSERT_TRUE(nvidia) << nvidia.error().message;
  EXPECT_EQ(nvidia->refcount, 2);
  EXPECT_THAT(nvidia->holders, ::testing::ElementsAre("nvidia_vgpu_vfio"));
  LogCapture logs;
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_THAT(this->unloaded_in(logs.text()), ::testing::ElementsAre("nvidia_vgpu_vfio", "nvidia"));
  this->expect_none_listed({"nvidia", "nvidia_vgpu_vfio"});
}

// nouveau, on its own: unloaded, and a second removal is the kernel's "not loaded".
TYPED_TEST_P(HostContract, NouveauIsUnloadedOnItsOwn) {
  this->node().load({"nouveau"});
  EXPECT_TRUE(this->host().module_loaded("nouveau"));
  LogCapture logs;
  const Status st = this->host().unload_module("nouveau");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_FALSE(this->host().module_loaded("nouveau"));
  this->expect_none_listed({"nouveau"});
  EXPECT_THAT(logs.text(), ::testing::HasSubstr("Successfully unloaded nouveau driver"));
  const Status again = this->host().unload_module("nouveau");
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().errno_is(ENOENT)) << again.error().message;
}

// A module still in use - held by another, or by an open file - is refused as delete_module(2) refuses it:
// EAGAIN, and it stays loaded.
TYPED_TEST_P(HostContract, ModuleInUseIsRefusedWithEagain) {
  this->node().load({"nvidia", "nvidia_uvm"});
  const Status held = this->host().unload_module("nvidia");
  ASSERT_FALSE(held);
  EXPECT_TRUE(held.error().errno_is(EAGAIN)) << "errno " << held.error().sys_errno;
  EXPECT_THAT(held.error().message, ::testing::HasSubstr("EAGAIN"));
  EXPECT_THAT(held.error().message, ::testing::HasSubstr("nvidia_uvm"));

  this->node().start_holder("uvm-user", {"/dev/nvidia-uvm"});
  const Status open = this->host().unload_module("nvidia_uvm");
  ASSERT_FALSE(open);
  EXPECT_TRUE(open.error().errno_is(EAGAIN)) << "errno " << open.error().sys_errno;
  EXPECT_THAT(open.error().message, ::testing::HasSubstr("EAGAIN"));
  this->expect_all_listed({"nvidia", "nvidia_uvm"});
}

// The driver root and its submounts: all gone, each mount before the one it sits on.
TYPED_TEST_P(HostContract, DriverRootAndItsSubmountsAreUnmountedDeepestFirst) {
  this->node().mount_driver_root({"usr", "usr/lib", "dev", "dev/shm"});
  ASSERT_EQ(this->node().mounts_under_driver_root().size(), 5U);
  LogCapture logs;
  const Status st = this->host().unmount_driver_root();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_THAT(this->node().mounts_under_driver_root(), ::testing::IsEmpty());
  const auto order = this->after_prefix(logs.text(), "debug Unmounted ");
  EXPECT_EQ(order.size(), 5U) << logs.text();
  for (size_t i = 0; i < order.size(); ++i) {
    for (size_t j = i + 1; j < order.size(); ++j) {
      EXPECT_NE(order[j].rfind(order[i] + "/", 0), 0U) << order[i] << " before its submount " << order[j];
    }
  }
  EXPECT_THAT(logs.text(),
              ::testing::HasSubstr("Successfully unmounted /run/nvidia/driver and all its submounts"));
}

// A process with its working directory and an open file in a submount: the driver root is detached all the
// same (umount2 MNT_DETACH, as upstream's lazy unmount), nothing stays mounted, and the process keeps its
// file.
TYPED_TEST_P(HostContract, BusyDriverRootIsDetachedWholeAndItsProcessKeepsItsFile) {
  this->node().mount_driver_root({"usr", "usr/lib"});
  const BusyMount busy = this->node().hold_busy(std::string(host::kDriverRoot) + "/usr/lib");
  const Status st = this->host().unmount_driver_root();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_THAT(this->node().mounts_under_driver_root(), ::testing::IsEmpty());
  EXPECT_EQ(this->node().read_busy_file(busy), BusyMount::kContent);
}

// A module removed behind the Host's back after it looked: the unload removes the rest and succeeds, and a
// removal of the gone module is the kernel's "not loaded".
TYPED_TEST_P(HostContract, ModuleGoneBetweenTheLookAndTheRemovalIsNoFailure) {
  this->node().load({"nvidia", "nvidia_uvm", "nvidia_modeset"});
  auto uvm = this->host().module_state("nvidia_uvm");
  ASSERT_TRUE(uvm) << uvm.error().message;
  ASSERT_TRUE(uvm->loaded);
  this->node().rmmod("nvidia_uvm");
  EXPECT_FALSE(this->host().module_loaded("nvidia_uvm"));
  LogCapture logs;
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_THAT(this->unloaded_in(logs.text()), ::testing::ElementsAre("nvidia_modeset", "nvidia"));
  this->expect_none_listed({"nvidia", "nvidia_uvm", "nvidia_modeset"});
  const Status gone = this->host().unload_module("nvidia_uvm");
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.error().errno_is(ENOENT)) << gone.error().message;
}

TYPED_TEST_P(HostContract, EveryDeviceFileIsAttributedUnderTheNvidiaRegistration) {
  this->expect_every_device_attributed({});
}

// Major 195 registered as `nvidia-frontend` (drivers up to 535): the same holders, the same modules.
TYPED_TEST_P(HostContract, EveryDeviceFileIsAttributedUnderTheFrontendRegistration) {
  this->expect_every_device_attributed({.frontend = true});
}

// The DRM device on nvidia's GPU device, as the real nvidia-drm makes it: its nodes' driver link names
// nvidia, and they are still nvidia_drm's.
TYPED_TEST_P(HostContract, EveryDeviceFileIsAttributedWithTheDrmDeviceOnTheGpu) {
  this->expect_every_device_attributed({.drm_on_gpu = true});
}

// What an open file of each device counts in the kernel's references: one on the module owning its
// character device, one on nvidia_modeset for /dev/nvidia-modeset, which nvidia forwards to it, and one on
// the DRM core besides nvidia_drm for a DRM node.
TYPED_TEST_P(HostContract, EachOpenDeviceFileTakesAReferenceOnTheModulesServingIt) {
  this->node().load(kDisplayStack);
  const std::vector<std::string> modules = {"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "drm"};
  const auto counts = [&] {
    std::map<std::string, int> out;
    for (const auto& m : modules) {
      auto st = this->host().module_state(m);
      out[m] = st ? st->refcount : -1;
    }
    return out;
  };
  const std::map<std::string, std::map<std::string, int>> takes = {
      {"/dev/nvidia0", {{"nvidia", 1}}},
      {"/dev/nvidiactl", {{"nvidia", 1}}},
      {"/dev/nvidia-uvm", {{"nvidia_uvm", 1}}},
      {"/dev/nvidia-modeset", {{"nvidia", 1}, {"nvidia_modeset", 1}}},
      {"/dev/dri/card0", {{"nvidia_drm", 1}, {"drm", 1}}},
      {"/dev/dri/renderD128", {{"nvidia_drm", 1}, {"drm", 1}}},
      {"/dev/nvidia-caps/nvidia-cap1", {{"nvidia", 1}}},
      {"/dev/nvidia-caps-imex-channels/channel0", {{"nvidia", 1}}},
  };
  for (const auto& [path, adds] : takes) {
    SCOPED_TRACE(path);
    const auto before = counts();
    const Holder h = this->node().start_holder("ref-holder", {path});
    auto want = before;
    for (const auto& [m, n] : adds) want[m] += n;
    EXPECT_EQ(counts(), want);
    this->node().stop_holder(h);
    EXPECT_EQ(counts(), before);
  }
}

// A reference on nvidia that no link, known pin or open file explains (nvidia_modeset's pins=1): refused,
// counted, and not put on a process.
TYPED_TEST_P(HostContract, UnexplainedReferenceIsRefusedAndNotPutOnAProcess) {
  const std::vector<std::string> stack = {"nvidia", "nvidia_modeset"};
  this->node().load(stack, {.modeset_pins = 1});
  auto nvidia = this->host().module_state("nvidia");
  ASSERT_TRUE(nvidia) << nvidia.error().message;
  EXPECT_EQ(nvidia->refcount, 2);
  EXPECT_THAT(nvidia->holders, ::testing::ElementsAre("nvidia_modeset"));
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_FALSE(st);
  EXPECT_TRUE(st.error().errno_is(EAGAIN)) << "errno " << st.error().sys_errno;
  EXPECT_THAT(st.error().message, ::testing::HasSubstr("nvidia: refcount 2"));
  EXPECT_THAT(st.error().message, ::testing::HasSubstr("1 other reference"));
  EXPECT_THAT(st.error().message, ::testing::Not(::testing::HasSubstr("device files open in")));
  EXPECT_THAT(st.error().message,
              ::testing::Not(::testing::HasSubstr("no process has its device files open")));
  this->expect_all_listed(stack);
}

TYPED_TEST_P(HostContract, OwnPodUidComesFromASystemdPodCgroup) {
  EXPECT_EQ(this->host().own_pod_uid(), std::nullopt);
  this->node().enter_pod(systemd_pod(kPodUid, kContainer));
  EXPECT_EQ(this->host().own_pod_uid(), kPodUid);
}

TYPED_TEST_P(HostContract, OwnPodUidComesFromACgroupfsPodCgroup) {
  EXPECT_EQ(this->host().own_pod_uid(), std::nullopt);
  this->node().enter_pod(cgroupfs_pod(kPodUid, kContainer));
  EXPECT_EQ(this->host().own_pod_uid(), kPodUid);
}

// A [permanent] member (no exit function): refused up front, saying so, never read as a holder's name; the
// removal of it alone is the kernel's EBUSY. Registered last: the kernel keeps it (and nvidia) loaded.
TYPED_TEST_P(HostContract, PermanentModuleIsRefusedUpFront) {
  const std::vector<std::string> stack = {"nvidia", "nvidia_peermem"};
  this->node().load(stack, {.permanent_peermem = true});
  EXPECT_THAT(this->node().proc_modules(), ::testing::HasSubstr("[permanent]"));
  auto peermem = this->host().module_state("nvidia_peermem");
  ASSERT_TRUE(peermem) << peermem.error().message;
  EXPECT_THAT(peermem->holders, ::testing::IsEmpty());

  const Status can = this->host().can_unload_nvidia();
  ASSERT_FALSE(can);
  EXPECT_THAT(can.error().message, ::testing::HasSubstr("nvidia_peermem"));
  EXPECT_THAT(can.error().message, ::testing::HasSubstr("permanent"));
  LogCapture logs;
  const Status st = this->host().unload_nvidia_modules();
  ASSERT_FALSE(st);
  EXPECT_THAT(st.error().message, ::testing::HasSubstr("permanent"));
  EXPECT_THAT(logs.text(), ::testing::Not(::testing::HasSubstr("Unloaded kernel module")));
  const Status one = this->host().unload_module("nvidia_peermem");
  ASSERT_FALSE(one);
  EXPECT_TRUE(one.error().errno_is(EBUSY)) << "errno " << one.error().sys_errno;
  EXPECT_THAT(one.error().message, ::testing::HasSubstr("permanent"));
  this->expect_all_listed(stack);
}

REGISTER_TYPED_TEST_SUITE_P(
    HostContract, CleanStackUnloadsHoldersFirstAndLeavesNoneLoaded,
    DeviceFileHolderRefusesTheUnloadBeforeAnythingIsRemoved, HolderLeavingAfterARefusalLetsTheUnloadThrough,
    ModuleOutsideTheStackHoldingNvidiaIsNamed, ModesetHeldThroughItsDeviceFileIsTheProcesssNotAKernelUsers,
    VgpuPinIsAKnownReference, NouveauIsUnloadedOnItsOwn, ModuleInUseIsRefusedWithEagain,
    DriverRootAndItsSubmountsAreUnmountedDeepestFirst, BusyDriverRootIsDetachedWholeAndItsProcessKeepsItsFile,
    ModuleGoneBetweenTheLookAndTheRemovalIsNoFailure, EveryDeviceFileIsAttributedUnderTheNvidiaRegistration,
    EveryDeviceFileIsAttributedUnderTheFrontendRegistration,
    EveryDeviceFileIsAttributedWithTheDrmDeviceOnTheGpu,
    EachOpenDeviceFileTakesAReferenceOnTheModulesServingIt, UnexplainedReferenceIsRefusedAndNotPutOnAProcess,
    OwnPodUidComesFromASystemdPodCgroup, OwnPodUidComesFromACgroupfsPodCgroup,
    PermanentModuleIsRefusedUpFront);

}  // namespace dm::test::host_contract
