#include "manager/rules/dra_helpers.h"

#include <fmt/format.h>

#include <algorithm>

#include "kube/objects.h"
#include "manager/rules/claims.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool has_container(const Json& pod, std::string_view name) {
  const Json* containers = kube::find(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array()) return false;
  return std::any_of(containers->begin(), containers->end(),
                     [&](const Json& c) { return kube::string_at(c, {"name"}) == name; });
}

// mps-control-daemon-<claim UID>-<5 hex>: the claim's UID, "" when the id has no such tail.
std::string mps_claim_uid(std::string_view app) {
  const std::string_view id = app.substr(kMpsControlDaemonPrefix.size());
  if (id.size() <= 6 || id[id.size() - 6] != '-') return "";
  return std::string(id.substr(0, id.size() - 6));
}

std::string holders_text(const std::vector<std::string>& holders) {
  return fmt::format("{}", fmt::join(holders, ", "));
}

}  // namespace

std::optional<DraHelper> dra_helper_of(const Json& pod) {
  const auto ref = kube::controller_ref(pod);
  if (!ref) return std::nullopt;
  if (const auto domain = kube::label(pod, kComputeDomainLabel); domain && !domain->empty()) {
    if (ref->kind == "DaemonSet" && ref->name == std::string(kComputeDomainDaemonSetPrefix) + *domain) {
      return DraHelper{.kind = DraHelperKind::kComputeDomainDaemon,
                       .pod = kube::ref_string(pod),
                       .uid = kube::string_at(pod, {"metadata", "uid"}),
                       .controller = "DaemonSet/" + ref->name,
                       .key = *domain};
    }
  }
  const auto app = kube::label(pod, "app");
  if (!app || !starts_with(*app, kMpsControlDaemonPrefix) || app->size() == kMpsControlDaemonPrefix.size())
    return std::nullopt;
  if (ref->kind != "ReplicaSet" || !starts_with(ref->name, *app + "-")) return std::nullopt;
  if (!has_container(pod, kMpsControlDaemonContainer)) return std::nullopt;
  return DraHelper{.kind = DraHelperKind::kMpsControlDaemon,
                   .pod = kube::ref_string(pod),
                   .uid = kube::string_at(pod, {"metadata", "uid"}),
                   .controller = "Deployment/" + *app,
                   .key = mps_claim_uid(*app)};
}

std::string describe(const DraHelper& helper) {
  if (helper.kind == DraHelperKind::kComputeDomainDaemon)
    return "ComputeDomain daemon of ComputeDomain " + helper.key + " (" + helper.controller + ")";
  return "MPS control daemon of claim " + (helper.key.empty() ? std::string("<unknown>") : helper.key) +
         " (" + helper.controller + ")";
}

std::string how_it_leaves(const DraHelper& helper) {
  if (helper.kind == DraHelperKind::kComputeDomainDaemon) {
    return "leaves when the DRA kubelet plugin unprepares the last channel claim of its ComputeDomain on the "
           "node and removes the node label " +
           std::string(kComputeDomainLabel) + "=" + helper.key + " (its DaemonSet selects it)";
  }
  return "leaves when the DRA kubelet plugin unprepares its claim (the last pod of the node using it is "
         "gone) "
         "and deletes its Deployment";
}

std::string what_keeps(const DraHelper& helper, const std::optional<std::string>& node_label,
                       const std::vector<ClaimHold>& holds) {
  std::vector<std::string> holders;
  if (helper.kind == DraHelperKind::kComputeDomainDaemon) {
    for (const auto& h : holds) {
      if (h.driver == kComputeDomainDraDriver) holders.push_back(h.pod + " (claim " + h.claim + ")");
    }
    const std::string label = std::string(kComputeDomainLabel) + "=" + helper.key;
    if (node_label == helper.key) {
      return "kept by the node label " + label +
             (holders.empty()
                  ? ", which the DRA kubelet plugin has not removed though no pod of the node "
                    "holds a ComputeDomain claim any more"
                  : ", while pods of the node still hold ComputeDomain claims: " + holders_text(holders));
    }
    return "the node label " + label +
           " is gone, so its DaemonSet deletes it; it is still terminating (its own daemon claim is "
           "unprepared by the DRA kubelet plugin)";
  }
  for (const auto& h : holds) {
    if (!helper.key.empty() && h.uid == helper.key) holders.push_back(h.pod + " (claim " + h.claim + ")");
  }
  if (helper.key.empty()) return "kept by a claim its name does not give (not the DRA driver's naming)";
  if (!holders.empty()) return "kept by claim " + helper.key + ", still held by " + holders_text(holders);
  return "kept by claim " + helper.key +
         ", which no pod of the node holds: the DRA kubelet plugin has not deleted its Deployment (it does "
         "when "
         "it unprepares that claim on this node)";
}

std::vector<std::string> dra_helper_oddities(const Json& node, const std::vector<Json>& pods,
                                             const std::optional<std::vector<ClaimHold>>& holds) {
  std::vector<std::string> out;
  const auto label = kube::label(node, kComputeDomainLabel);
  bool daemon_of_label = false;
  for (const auto& pod : pods) {
    if (kube::pod_finished(pod)) continue;
    const auto helper = dra_helper_of(pod);
    if (!helper) continue;
    if (helper->kind == DraHelperKind::kComputeDomainDaemon) {
      if (label == helper->key) {
        daemon_of_label = true;
      } else {
        out.push_back(fmt::format(
            "{}: {}, but the node label {} is {}: its DaemonSet controller is taking it off the node",
            helper->pod, describe(*helper), kComputeDomainLabel, label ? "\"" + *label + "\"" : "absent"));
      }
      continue;
    }
    if (!holds || helper->key.empty()) continue;
    const bool held =
        std::any_of(holds->begin(), holds->end(), [&](const ClaimHold& h) { return h.uid == helper->key; });
    if (!held) {
      out.push_back(fmt::format(
          "{}: {}, but no pod of this node holds that claim (its Deployment pinned here while the claim is "
          "used elsewhere, or left behind): only the DRA kubelet plugin that started it removes it, so the "
          "run would wait for it and fail",
          helper->pod, describe(*helper)));
    }
  }
  if (label && !label->empty() && !daemon_of_label) {
    out.push_back(fmt::format(
        "node label {}={} but no ComputeDomain daemon of that ComputeDomain runs on the node: the DRA "
        "kubelet plugin removes the label when it unprepares the domain's last channel claim here; nothing "
        "to wait for",
        kComputeDomainLabel, *label));
  }
  return out;
}

}  // namespace dm::manager
