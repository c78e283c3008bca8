// Required node placement as kube-scheduler's NodeAffinity filter decides it (the nodeaffinity package of
// k8s.io/component-helpers): a pod fits a node when its spec.nodeSelector AND its required node affinity
// match. The DaemonSet controller asks the same question to decide whether its pod stays on a node, which is
// how a paused node label takes a DaemonSet's pods off (docs/behaviour.md, Operand waits).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace dm::kube {

// What required placement is checked against: the node's name (matchFields on metadata.name) and labels.
struct NodePlacement {
  std::string name;
  std::map<std::string, std::string> labels;
};

// spec.nodeSelector: every key present with exactly that value (an absent or empty selector matches).
bool node_selector_matches(const nlohmann::json& pod, const NodePlacement& node);

// spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution (true when the pod has none):
// the nodeSelectorTerms are ORed, the requirements of a term ANDed. matchExpressions take In, NotIn,
// Exists, DoesNotExist, Gt and Lt (Gt/Lt: one integer value, and a label that is no integer does not
// match); matchFields take In and NotIn with one value on metadata.name. An empty term list, a term without
// requirements, and a term with an invalid requirement (an unknown operator, a wrong number of values, a
// field other than metadata.name) match nothing, as in the scheduler.
bool required_node_affinity_matches(const nlohmann::json& pod, const NodePlacement& node);

// Both of the above: the scheduler would place the pod on the node (taints aside).
bool pod_fits_node(const nlohmann::json& pod, const NodePlacement& node);

// The node label keys the required node affinity's matchExpressions name.
std::set<std::string> required_node_affinity_keys(const nlohmann::json& pod);

}  // namespace dm::kube
