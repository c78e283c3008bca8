// Holders of the NVIDIA driver named by pod: the UID from the process's cgroup looked up among the node's
// pods (mirror pods by their static pod's hash), host processes said to be host processes.
#include "manager/pods/holders.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/doubles.h"

namespace dm::manager {
namespace {

using ::testing::ElementsAre;

nlohmann::json pod(const std::string& ns, const std::string& name, const std::string& uid,
                   const std::string& mirror_of = {}) {
  nlohmann::json p = {{"metadata", {{"namespace", ns}, {"name", name}, {"uid", uid}}}};
  if (!mirror_of.empty()) p["metadata"]["annotations"]["kubernetes.io/config.mirror"] = mirror_of;
  return p;
}

host::HolderProcess proc(int pid, const std::string& comm, const std::string& uid,
                         std::vector<std::string> modules = {"nvidia"}) {
  host::HolderProcess p;
  p.pid = pid;
  p.comm = comm;
  p.pod_uid = uid;
  p.modules = std::move(modules);
  return p;
}

const PodList kPods = {pod("ml", "train-0", "11111111-2222-3333-4444-555555555555"),
                       pod("kube-system", "gpu-probe-node1", "66666666-7777-8888-9999-000000000000",
                           "0123456789abcdef0123456789abcdef")};

TEST(DescribeHolders, PodsHostProcessesAndUnknownUids) {
  const auto lines = describe_holders(
      {proc(4242, "python3", "11111111-2222-3333-4444-555555555555", {"nvidia", "nvidia_uvm"}),
       proc(17, "nvidia-persiste", ""), proc(99, "probe", "0123456789abcdef0123456789abcdef"),
       proc(5, "gone", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")},
      kPods);
  EXPECT_THAT(lines,
              ElementsAre("nvidia, nvidia_uvm: held by pid 4242 (python3) in pod ml/train-0",
                          "nvidia: held by pid 17 (nvidia-persiste), a host process, not a pod",
                          "nvidia: held by pid 99 (probe) in pod kube-system/gpu-probe-node1",
                          "nvidia: held by pid 5 (gone) in pod with UID aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee "
                          "(not among this node's pods)"));
}

TEST(NameDriverHolders, AppendsTheHoldersToTheErrorWithoutLoggingThem) {
  test::LogCapture logs;
  const Error e = name_driver_holders(Error("NVIDIA driver kernel modules are in use, none was unloaded"),
                                      {proc(4242, "python3", "11111111-2222-3333-4444-555555555555")}, kPods);
  EXPECT_EQ(
      e.message,
      "NVIDIA driver kernel modules are in use, none was unloaded. nvidia: held by pid 4242 (python3) in "
      "pod ml/train-0");
  EXPECT_EQ(logs.text(), "");  // the error carries them to whoever handles it
}

TEST(NameDriverHolders, NoHoldersLeavesTheErrorAsItIs) {
  const Error e = name_driver_holders(Error("in use", 0, "Reason"), {}, kPods);
  EXPECT_EQ(e.message, "in use");
  EXPECT_EQ(e.reason, "Reason");
}

}  // namespace
}  // namespace dm::manager
