#include "manager/rules/gpu_access.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "manager/rules/pod_rules.h"

namespace dm::manager {

using Json = nlohmann::json;
using ::testing::HasSubstr;
namespace {

Json pod(const std::string& name, const std::string& owner_kind = "ReplicaSet") {
  Json p = {{"metadata", {{"namespace", "ml"}, {"name", name}, {"uid", "uid-" + name}}},
            {"spec", {{"nodeName", "n1"}, {"containers", Json::array({{{"name", "c"}}})}}},
            {"status", {{"phase", "Running"}}}};
  if (!owner_kind.empty()) {
    p["metadata"]["ownerReferences"] =
        Json::array({{{"kind", owner_kind}, {"name", name + "-owner"}, {"controller", true}}});
  }
  return p;
}

Json with_env(Json p, const std::string& value) {
  p["spec"]["containers"][0]["env"] = Json::array({{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"value", value}}});
  return p;
}

// The cluster's RuntimeClasses: name -> handler.
RuntimeClassLookup classes(std::map<std::string, std::string> handlers, int* lookups = nullptr) {
  return [handlers = std::move(handlers), lookups](const std::string& name) -> Result<RuntimeClassInfo> {
    if (lookups != nullptr) ++*lookups;
    auto it = handlers.find(name);
    if (it == handlers.end()) return RuntimeClassInfo::missing();
    return RuntimeClassInfo::found(it->second);
  };
}

std::string why(const Json& p, const RuntimeClassLookup& lookup = {}) {
  auto a = gpu_access_without_request(p, lookup);
  EXPECT_TRUE(a) << a.error().message;
  return a ? a->why : "";
}

TEST(GpuAccessTest, NvidiaRuntimeHandlers) {
  EXPECT_TRUE(is_nvidia_runtime_handler("nvidia"));
  EXPECT_TRUE(is_nvidia_runtime_handler("nvidia-cdi"));
  EXPECT_TRUE(is_nvidia_runtime_handler("nvidia-legacy"));
  EXPECT_FALSE(is_nvidia_runtime_handler("runc"));
  EXPECT_FALSE(is_nvidia_runtime_handler("nvidia-experimental"));
}

TEST(GpuAccessTest, TheRuntimeClassCountsThroughItsHandler) {
  const auto lookup = classes({{"nvidia", "nvidia"}, {"gpu", "nvidia-cdi"}, {"plain", "runc"}});
  Json p = pod("notebook");
  p["spec"]["runtimeClassName"] = "gpu";
  EXPECT_EQ(why(p, lookup),
            "RuntimeClass \"gpu\" runs it on the NVIDIA container runtime (handler \"nvidia-cdi\")");
  p["spec"]["runtimeClassName"] = "plain";
  EXPECT_EQ(why(p, lookup), "");
  // Without a lookup the class is not read.
  p["spec"]["runtimeClassName"] = "nvidia";
  EXPECT_EQ(why(p), "");
}

TEST(GpuAccessTest, AMissingRuntimeClassIsANoteAndNotCounted) {
  Json p = pod("notebook");
  p["spec"]["runtimeClassName"] = "gone";
  auto a = gpu_access_without_request(p, classes({}));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->why, "");
  EXPECT_EQ(a->note,
            "its RuntimeClass \"gone\" does not exist, so it is not counted as a GPU pod through it");
  // Another signal still counts.
  a = gpu_access_without_request(with_env(p, "all"), classes({}));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->why, "NVIDIA_VISIBLE_DEVICES=all in a container");
}

// A class that may not be read (the GPU Operator's stock role): the toolkit's own names count by name, any
// other name is a note and not counted.
TEST(GpuAccessTest, AnUnreadableRuntimeClassCountsByTheToolkitsNames) {
  const RuntimeClassLookup unreadable = [](const std::string&) -> Result<RuntimeClassInfo> {
    return RuntimeClassInfo::unreadable();
  };
  for (const std::string name : {"nvidia", "nvidia-cdi", "nvidia-legacy"}) {
    Json p = pod("notebook");
    p["spec"]["runtimeClassName"] = name;
    auto a = gpu_access_without_request(p, unreadable);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->why, "RuntimeClass \"" + name +
                          "\" may not be read; its name is one the NVIDIA Container Toolkit gives its "
                          "classes, so it is taken to run on the NVIDIA container runtime");
    EXPECT_EQ(a->note, "");
  }
  Json p = pod("notebook");
  p["spec"]["runtimeClassName"] = "gpu-runtime";
  auto a = gpu_access_without_request(p, unreadable);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->why, "");
  EXPECT_EQ(a->note,
            "its RuntimeClass \"gpu-runtime\" may not be read, so it is not counted as a GPU pod "
            "through it");
  // Another signal still counts.
  a = gpu_access_without_request(with_env(p, "all"), unreadable);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->why, "NVIDIA_VISIBLE_DEVICES=all in a container");
}

TEST(GpuAccessTest, ALookupErrorIsAnError) {
  Json p = pod("notebook");
  p["spec"]["runtimeClassName"] = "nvidia";
  auto a = gpu_access_without_request(
      p, [](const std::string&) -> Result<RuntimeClassInfo> { return Error("server down", 503); });
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message, "server down");
}

TEST(GpuAccessTest, VisibleDevicesOtherThanVoidNoneOrEmpty) {
  EXPECT_EQ(why(with_env(pod("a"), "all")), "NVIDIA_VISIBLE_DEVICES=all in a container");
  EXPECT_EQ(why(with_env(pod("a"), "0,1")), "NVIDIA_VISIBLE_DEVICES=0,1 in a container");
  EXPECT_EQ(why(with_env(pod("a"), "void")), "");
  EXPECT_EQ(why(with_env(pod("a"), "none")), "");
  EXPECT_EQ(why(with_env(pod("a"), "")), "");
  // A value from elsewhere (a ConfigMap) is not known.
  Json from = pod("a");
  from["spec"]["containers"][0]["env"] = Json::array(
      {{{"name", "NVIDIA_VISIBLE_DEVICES"}, {"valueFrom", {{"configMapKeyRef", {{"name", "x"}}}}}}});
  EXPECT_EQ(why(from), "");
}

TEST(GpuAccessTest, CdiAnnotationsNamingNvidiaDevices) {
  Json p = pod("a");
  p["metadata"]["annotations"] = {{"cdi.k8s.io/main", "vendor.example/nic=0, nvidia.com/gpu=0"}};
  EXPECT_EQ(why(p), "CDI annotation cdi.k8s.io/main=vendor.example/nic=0, nvidia.com/gpu=0");
  p["metadata"]["annotations"] = {{"cdi.k8s.io/main", "vendor.example/nic=0"}};
  EXPECT_EQ(why(p), "");
  p["metadata"]["annotations"] = {{"example.com/devices", "nvidia.com/gpu=0"}};
  EXPECT_EQ(why(p), "");
}

TEST(GpuAccessTest, DaemonSetPodsAreNeverCountedThisWay) {
  int lookups = 0;
  Json p = with_env(pod("device-plugin", "DaemonSet"), "all");
  p["spec"]["runtimeClassName"] = "nvidia";
  EXPECT_EQ(why(p, classes({{"nvidia", "nvidia"}}, &lookups)), "");
  EXPECT_EQ(lookups, 0);
}

// In the GPU-workload eviction: counted, evicted with the reason in the decision, held to the same rules
// (a pod without a controller is refused); the missing class is a warning on the skipped pod.
TEST(GpuAccessTest, GpuWorkloadEvictionCountsThemWithTheirReason) {
  Json notebook = pod("notebook");
  notebook["spec"]["runtimeClassName"] = "nvidia";
  Json lost = pod("lost");
  lost["spec"]["runtimeClassName"] = "gone";
  const std::vector<Json> pods = {notebook, with_env(pod("all", ""), "all"), lost,
                                  with_env(pod("ds", "DaemonSet"), "all")};
  PodFacts facts;
  facts.runtime_class_handler = classes({{"nvidia", "nvidia"}});
  auto plan = decide_gpu_workload_eviction(pods, DrainOptions{}, facts);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->gpu_pods, 2U);
  ASSERT_EQ(plan->pods.to_evict.size(), 1U);
  EXPECT_EQ(plan->pods.decisions[0].log_line(),
            "ml/notebook: evict: GPU pod without a GPU request: RuntimeClass \"nvidia\" runs it on the "
            "NVIDIA container "
            "runtime (handler \"nvidia\")");
  ASSERT_EQ(plan->pods.errors.size(), 1U);
  EXPECT_THAT(plan->pods.errors[0],
              HasSubstr("ml/all: GPU pod cannot be evicted: cannot delete Pods that declare no "
                        "controller"));
  EXPECT_THAT(plan->pods.errors[0],
              HasSubstr("(a GPU pod without a GPU request: NVIDIA_VISIBLE_DEVICES=all"));
  EXPECT_EQ(plan->pods.decisions[2].notice, Notice::kWarning);
  EXPECT_THAT(plan->pods.decisions[2].reason, HasSubstr("its RuntimeClass \"gone\" does not exist"));
  EXPECT_EQ(plan->pods.decisions[3].reason, "does not use a GPU");
}

}  // namespace
}  // namespace dm::manager
