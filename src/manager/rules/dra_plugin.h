// NVIDIA's DRA kubelet plugin however it was installed, and whether DRA is in use on a node
// (docs/behaviour.md, DRA claims). The GPU Operator deploys the plugin with the label
// app=nvidia-dra-driver-kubelet-plugin and a node label of its own (nvidia.com/gpu.deploy.dra-driver); the
// DRA driver's own Helm chart (dra-driver-nvidia-gpu, formerly nvidia-dra-driver-gpu) deploys the DaemonSet
// <name>-kubelet-plugin in any namespace, its pods labelled app.kubernetes.io/name=<name> and
// <name>-component=kubelet-plugin, where <name> is the chart's name unless nameOverride changes it. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "manager/rules/pod_rules.h"

namespace dm::manager {

// The names of the DRA driver's chart, old and new.
inline constexpr std::string_view kDraChartNames[] = {"dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"};
// The component label's value on the chart's kubelet-plugin pods.
inline constexpr std::string_view kDraChartPluginComponent = "kubelet-plugin";

// A pod of the chart's kubelet-plugin DaemonSet: "<key>=kubelet-plugin" (the label that says so), else
// nullopt. The component key is <name>-component with <name> the pod's app.kubernetes.io/name, or one of
// the chart's own names; the name must be NVIDIA's (it contains "nvidia"), so another vendor's plugin
// deployed from a chart of the same layout is not taken for it.
std::optional<std::string> dra_chart_plugin_label(const nlohmann::json& pod);

// A ResourceSlice of the NVIDIA GPU DRA driver (spec.driver gpu.nvidia.com) published for `node`.
bool is_gpu_slice_of_node(const nlohmann::json& slice, std::string_view node);

// Why DRA counts as in use on the node, "" when nothing says so: the operator's dra-driver label (its
// snapshot), the node's gpu.nvidia.com ResourceSlices, a pod of the chart's kubelet plugin, a pod holding an
// allocated GPU claim. First match wins; each input is what the caller could read.
struct DraEvidence {
  bool operator_label = false;         // the dra-driver label's snapshot is non-empty
  size_t gpu_slices = 0;               // gpu.nvidia.com ResourceSlices of the node
  std::vector<std::string> plugins;    // "ns/name" of the chart's kubelet-plugin pods on the node
  std::vector<std::string> claimants;  // "ns/name" of pods on the node holding an allocated GPU claim
};
std::string dra_in_use_reason(const DraEvidence& e);

// Adds what `pod` (a pod of the node) says: the chart's kubelet plugin, a holder of an allocated GPU claim
// (facts.holds_gpu_claim, asked only for a pod that names a claim; none when null; a lookup error counts the
// pod as no claimant). Finished pods say nothing.
void add_pod_dra_evidence(const nlohmann::json& pod, const PodFacts& facts, DraEvidence& e);

}  // namespace dm::manager
