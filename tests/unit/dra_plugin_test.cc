#include "manager/rules/dra_plugin.h"

#include <gtest/gtest.h>

#include "manager/rules/pod_rules.h"

namespace dm::manager {

using Json = nlohmann::json;
namespace {

Json pod(const Json& labels, const std::string& owner_kind = "DaemonSet") {
  Json p = {{"metadata", {{"namespace", "dra"}, {"name", "plugin-x"}, {"uid", "u1"}, {"labels", labels}}},
            {"spec", {{"nodeName", "n1"}, {"containers", Json::array({{{"name", "gpus"}}})}}},
            {"status", {{"phase", "Running"}}}};
  p["metadata"]["ownerReferences"] =
      Json::array({{{"kind", owner_kind}, {"name", "plugin"}, {"controller", true}}});
  return p;
}

// The chart's pod labels as its templates render them (app.kubernetes.io/name is the chart's name unless
// nameOverride changes it; the component key is <name>-component).
TEST(DraPluginTest, TheChartsKubeletPluginPodsByTheirLabels) {
  EXPECT_EQ(dra_chart_plugin_label(pod({{"app.kubernetes.io/name", "dra-driver-nvidia-gpu"},
                                        {"app.kubernetes.io/instance", "my-release"},
                                        {"dra-driver-nvidia-gpu-component", "kubelet-plugin"}})),
            "dra-driver-nvidia-gpu-component=kubelet-plugin");
  // The older chart's name.
  EXPECT_EQ(dra_chart_plugin_label(pod({{"app.kubernetes.io/name", "nvidia-dra-driver-gpu"},
                                        {"nvidia-dra-driver-gpu-component", "kubelet-plugin"}})),
            "nvidia-dra-driver-gpu-component=kubelet-plugin");
  // nameOverride: the name and the key follow it.
  EXPECT_EQ(dra_chart_plugin_label(
                pod({{"app.kubernetes.io/name", "nvidia-dra"}, {"nvidia-dra-component", "kubelet-plugin"}})),
            "nvidia-dra-component=kubelet-plugin");
  // The older chart keeps Chart.Name in the key whatever the name.
  EXPECT_EQ(dra_chart_plugin_label(pod({{"app.kubernetes.io/name", "gpu-dra"},
                                        {"nvidia-dra-driver-gpu-component", "kubelet-plugin"}})),
            "nvidia-dra-driver-gpu-component=kubelet-plugin");
}

TEST(DraPluginTest, OtherComponentsAndOtherVendorsAreNotThePlugin) {
  // The chart's controller.
  EXPECT_FALSE(dra_chart_plugin_label(pod({{"app.kubernetes.io/name", "dra-driver-nvidia-gpu"},
                                           {"dra-driver-nvidia-gpu-component", "controller"}})));
  // Another vendor's plugin from a chart of the same layout.
  EXPECT_FALSE(dra_chart_plugin_label(pod({{"app.kubernetes.io/name", "dra-example-driver"},
                                           {"dra-example-driver-component", "kubelet-plugin"}})));
  // A component label without a name to match it.
  EXPECT_FALSE(dra_chart_plugin_label(pod({{"some-nvidia-component", "kubelet-plugin"}})));
  EXPECT_FALSE(dra_chart_plugin_label(pod(Json::object())));
}

TEST(DraPluginTest, GpuSlicesOfTheNode) {
  const Json slice = {{"spec", {{"driver", "gpu.nvidia.com"}, {"nodeName", "n1"}}}};
  EXPECT_TRUE(is_gpu_slice_of_node(slice, "n1"));
  EXPECT_FALSE(is_gpu_slice_of_node(slice, "n2"));
  EXPECT_FALSE(
      is_gpu_slice_of_node({{"spec", {{"driver", "compute-domain.nvidia.com"}, {"nodeName", "n1"}}}}, "n1"));
}

TEST(DraPluginTest, WhyDraCountsAsInUseFirstMatchWins) {
  DraEvidence e;
  EXPECT_EQ(dra_in_use_reason(e), "");
  e.claimants = {"ml/a", "ml/b"};
  EXPECT_EQ(dra_in_use_reason(e), "pods hold allocated GPU claims here (ml/a and 1 more)");
  e.plugins = {"dra/plugin-x"};
  EXPECT_EQ(dra_in_use_reason(e), "the NVIDIA DRA kubelet plugin runs here (dra/plugin-x)");
  e.gpu_slices = 2;
  EXPECT_EQ(dra_in_use_reason(e), "the node has 2 gpu.nvidia.com ResourceSlices");
  e.operator_label = true;
  EXPECT_EQ(dra_in_use_reason(e),
            "the GPU Operator deploys its DRA driver here (nvidia.com/gpu.deploy.dra-driver)");
}

// In the client pipeline the chart's plugin is a DRA plugin client without an annotation (reset in the DRA
// plugin phase, with its reason on the line), and an opt-out annotation still wins.
TEST(DraPluginTest, TheChartsPluginIsADraPluginClientByWhatItIs) {
  const Json plugin = pod({{"app.kubernetes.io/name", "dra-driver-nvidia-gpu"},
                           {"dra-driver-nvidia-gpu-component", "kubelet-plugin"}});
  EXPECT_TRUE(is_dra_plugin_client(plugin));
  GpuClientOptions o;
  o.phase = GpuClientPhase::kDraPlugin;
  auto d = gpu_client_pipeline(o).decide(plugin);
  EXPECT_EQ(d.verdict, Verdict::kDelete);
  EXPECT_EQ(d.log_line(),
            "dra/plugin-x: evict: the NVIDIA DRA kubelet plugin of the DRA driver's chart "
            "(dra-driver-nvidia-gpu-component=kubelet-plugin), a DRA plugin client by what it is");
  o.phase = GpuClientPhase::kWithOperands;
  d = gpu_client_pipeline(o).decide(plugin);
  EXPECT_EQ(d.verdict, Verdict::kSkip);
  EXPECT_EQ(d.filter, "phase");
  Json opted_out = plugin;
  opted_out["metadata"]["annotations"] = {{"nvidia.com/gpu.client", "false"}};
  o.phase = GpuClientPhase::kDraPlugin;
  d = gpu_client_pipeline(o).decide(opted_out);
  EXPECT_EQ(d.verdict, Verdict::kSkip);
  EXPECT_EQ(d.filter, "designation");
}

}  // namespace
}  // namespace dm::manager
