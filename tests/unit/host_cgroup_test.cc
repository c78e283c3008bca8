// The pod of a process from its /proc/<pid>/cgroup, on fixtures of every kubelet layout: cgroup v1 and v2,
// the systemd and cgroupfs drivers, containerd and CRI-O, a kubelet cgroup root, static pods, host processes.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "host/cgroup.h"
#include "support/process.h"

namespace dm::host {
namespace {

constexpr const char* kUid = "8f4b3a2e-1c5d-4e6f-9a0b-7c8d9e0f1a2b";

std::optional<std::string> uid_of_fixture(const std::string& name) {
  return pod_uid_from_cgroup(
      test::read_file(test::source_path("tests/fixtures/host/cgroup/" + name + ".txt")));
}

class PodCgroupLayouts : public ::testing::TestWithParam<const char*> {};

TEST_P(PodCgroupLayouts, NameThePodUidWithDashes) {
  EXPECT_EQ(uid_of_fixture(GetParam()), std::optional<std::string>(kUid));
}

INSTANTIATE_TEST_SUITE_P(Layouts, PodCgroupLayouts,
                         ::testing::Values("v2-systemd-containerd-burstable", "v2-systemd-crio-besteffort",
                                           "v2-systemd-containerd-guaranteed",
                                           "v2-cgroupfs-containerd-burstable", "v2-cgroupfs-crio-guaranteed",
                                           "v1-cgroupfs-containerd-besteffort", "v1-systemd-crio-burstable",
                                           "v2-systemd-kubelet-root"));

TEST(PodCgroup, StaticPodHashIsItsUid) {
  EXPECT_EQ(uid_of_fixture("v2-systemd-static-pod"),
            std::optional<std::string>("0123456789abcdef0123456789abcdef"));
}

TEST(PodCgroup, HostProcessesAreNotInAPod) {
  for (const char* name : {"host-service", "host-session", "v1-host"}) {
    EXPECT_EQ(uid_of_fixture(name), std::nullopt) << name;
  }
  // The real CUDA process of the GPU host reading: a hex id in its path, but no kubepods.
  EXPECT_EQ(pod_uid_from_cgroup("0::/process_api/e97ec1dfcb4924daf5a6180c74cbc263\n"), std::nullopt);
}

TEST(PodCgroup, MalformedTextIsNotAPod) {
  EXPECT_EQ(pod_uid_from_cgroup(""), std::nullopt);
  EXPECT_EQ(pod_uid_from_cgroup("garbage\n::\n0::/kubepods/burstable/podnot-a-uid/x\n"), std::nullopt);
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/burstable/pod8f4b3a2e-1c5d-4e6f-9a0b/x\n"),
            std::nullopt);  // short
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods.slice/kubepods-podzzzz.slice\n"), std::nullopt);
  // 32 digits and four separators, but two of them at one group boundary: no UID (was returned as
  // "6f4b3a2e-1c5d-4afbe069--7c8d9e0f1a2b").
  EXPECT_EQ(pod_uid_from_cgroup("0::/kubepods/besteffort/pod6f4b3a2e-1c5d-4afbe069--7c8d9e0f1a2b/x\n"),
            std::nullopt);
  EXPECT_EQ(
      pod_uid_from_cgroup("0::/kubepods.slice/kubepods-pod6f4b3a2e_1c5d_4afbe069__7c8d9e0f1a2b.slice\n"),
      std::nullopt);
}

}  // namespace
}  // namespace dm::host
