// The helper pods NVIDIA's DRA driver (dra-driver-nvidia-gpu) starts beside its kubelet plugin, recognised
// from the pod object alone (docs/behaviour.md, DRA driver helpers): the ComputeDomain daemon, a pod of the
// DaemonSet the ComputeDomain controller creates per ComputeDomain, and the MPS control daemon, the pod of
// the Deployment the GPU kubelet plugin creates per MPS-shared claim. Both hold the driver; both leave when
// the plugin unprepares the last claim that needs them on the node, and their controllers bring an evicted
// one straight back, so the run waits for them and never evicts them. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "manager/rules/claims.h"

namespace dm::manager {

// The node label the ComputeDomain kubelet plugin sets to the ComputeDomain's UID while it has a channel
// claim of that domain prepared on the node (and removes when it unprepares it); the label key of the
// daemon's DaemonSet and pods, and its DaemonSet's nodeSelector.
inline constexpr std::string_view kComputeDomainLabel = "resource.nvidia.com/computeDomain";
// The ComputeDomain daemon's DaemonSet is computedomain-daemon-<ComputeDomain UID>.
inline constexpr std::string_view kComputeDomainDaemonSetPrefix = "computedomain-daemon-";
// The MPS control daemon's Deployment and its pods' app label are mps-control-daemon-<claim UID>-<5 hex>.
inline constexpr std::string_view kMpsControlDaemonPrefix = "mps-control-daemon-";
// The container the MPS control daemon's template names.
inline constexpr std::string_view kMpsControlDaemonContainer = "mps-control-daemon";

enum class DraHelperKind { kComputeDomainDaemon, kMpsControlDaemon };

struct DraHelper {
  DraHelperKind kind = DraHelperKind::kComputeDomainDaemon;
  std::string pod;         // ns/name
  std::string uid;         // the pod's UID
  std::string controller;  // "DaemonSet/computedomain-daemon-<uid>" or "Deployment/mps-control-daemon-<id>"
  // kComputeDomainDaemon: the ComputeDomain's UID (its label value); kMpsControlDaemon: the UID of the claim
  // it serves ("" when the name does not carry one).
  std::string key;
};

// The helper `pod` is, or nullopt. A ComputeDomain daemon: label resource.nvidia.com/computeDomain=<v> (v not
// empty) and its controller the DaemonSet computedomain-daemon-<v>. An MPS control daemon: label
// app=mps-control-daemon-<id>, its controller a ReplicaSet named <app>-<hash> (the Deployment's), and a
// container named mps-control-daemon.
std::optional<DraHelper> dra_helper_of(const nlohmann::json& pod);

// "ComputeDomain daemon of ComputeDomain <uid>" / "MPS control daemon of claim <uid>".
std::string describe(const DraHelper& helper);
// How it leaves the node, as the run and `plan` say it.
std::string how_it_leaves(const DraHelper& helper);

// What keeps a helper on the node, one sentence: for a ComputeDomain daemon the node label of its domain
// (node_label: the node's resource.nvidia.com/computeDomain value, nullopt = absent) and the pods holding
// compute-domain.nvidia.com claims; for an MPS control daemon the pods holding its claim.
std::string what_keeps(const DraHelper& helper, const std::optional<std::string>& node_label,
                       const std::vector<ClaimHold>& holds);

// Odd shapes on a node, one line each: a ComputeDomain node label without a daemon pod of that domain on the
// node; a ComputeDomain daemon whose domain is not the node label's (its DaemonSet controller is taking it
// off); an MPS control daemon whose claim no pod of the node holds (its Deployment pinned here while its
// claim is used on another node, or left behind by the plugin): only the plugin that started it removes it.
// `holds` nullopt: the claims could not be read, the last check is left out.
std::vector<std::string> dra_helper_oddities(const nlohmann::json& node,
                                             const std::vector<nlohmann::json>& pods,
                                             const std::optional<std::vector<ClaimHold>>& holds);

}  // namespace dm::manager
