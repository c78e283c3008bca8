#include "manager/plan/parts.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "kube/objects.h"
#include "manager/commands/preflight.h"
#include "manager/node/lease.h"
#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "manager/pods/holders.h"
#include "manager/rules/claims.h"
#include "manager/rules/paused_record.h"

namespace dm::manager {

using Json = nlohmann::json;
using kube::Taint;

namespace {
constexpr const char* kOnTheNodeOnly = "on the node only";
}  // namespace

void plan_leftovers(Plan& plan, const PlanInputs& in, const Snapshot& snapshot,
                    LeftoverTaint leftover_taint) {
  const Json& node = in.node;
  if (auto owned = taint_owner_annotation(node)) {
    plan.leftovers.push_back("taint " + *owned + " of an earlier run: " +
                             (leftover_taint == LeftoverTaint::kKeepUntilUnload
                                  ? "kept on until the driver is unloaded, then removed"
                                  : "removed at the start"));
  }
  if (cordoned_by_us(node)) {
    plan.leftovers.push_back(std::string("cordon of an earlier run: ") +
                             (snapshot.policy_enabled()
                                  ? "the upgrade policy owns the cordon, only our annotation is dropped"
                                  : "uncordoned at the end"));
  }
  const PausedRecord record = paused_record_of(node);
  for (const auto& [key, before] : record) {
    plan.leftovers.push_back(fmt::format(
        "label {} recorded as paused by a run (was \"{}\"): restored with the other labels", key, before));
  }
  if (auto lease = lease_of(node); lease && !in.read_at) {
    plan.leftovers.push_back("the lease of a run (" + lease->holder +
                             "): whether it is still held is unknown (no time of reading)");
  } else if (lease) {
    const auto now = *in.read_at;
    if (!lease->expired(now)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::seconds>(lease->renewed + lease->duration - now).count();
      plan.leftovers.push_back(fmt::format(
          "a run holds the node's lease ({}, {} s left): a run now would wait for it (up to {} s) before "
          "changing anything",
          lease->holder, left, LeaseOptions{}.wait_at_most.count()));
    } else {
      plan.leftovers.push_back("a lapsed lease of an earlier run (" + lease->holder + "): taken over");
    }
  }
}

void plan_host(Plan& plan, const PlanInputs& in) {
  plan.host_driver_version = in.host_driver_version.value_or("");
  plan.nvidia_loaded = in.nvidia_loaded;
  for (const auto& m : in.modules) plan.modules.push_back({m.name, m.refcount, m.holders, m.users});
  plan.holders = describe_holders(in.holders, in.pods);
  plan.mounts = in.mounts;
  plan.mounts_note = in.mounts_error;
  plan.host_on_node = in.on_node;
  plan.host_note = in.host_note;
  if (!in.on_node) {
    plan.unload = kOnTheNodeOnly;
    plan.mounts_note = kOnTheNodeOnly;
  } else if (!in.can_unload) {
    plan.unload = "never: " + in.can_unload.error().message;
  } else if (!in.nvidia_loaded) {
    plan.unload = "nothing to unload: nvidia is not loaded";
  } else if (!in.holders.empty()) {
    plan.unload = "busy now: held by the processes below (the run unloads only once they are gone)";
  } else {
    plan.unload = "possible now: no process holds the driver";
  }
}

// The own pod, as the run's preflight finds it.
void plan_own_pod(Plan& plan, const PlanInputs& in, const std::optional<Taint>& taint) {
  if (in.own_pod) {
    plan.own_pod = in.own_pod->ref;
    plan.own_pod_note = in.own_pod_ref ? "found as " + in.own_pod_ref->source : "";
    if (taint) plan.own_pod_tolerates = !check_tolerates_taint(*in.own_pod, *taint).has_value();
  } else if (!in.own_pod_error.empty()) {
    plan.own_pod_note = in.own_pod_error;
  } else {
    plan.own_pod_note =
        "not found (" +
        (in.own_pod_ref ? in.own_pod_ref->ns + "/" + in.own_pod_ref->name + " from " + in.own_pod_ref->source
                        : std::string("no POD_NAME or HOSTNAME")) +
        "): not running in a pod, no toleration check";
  }
}

void plan_node_facts(Plan& plan, const PlanInputs& in, const std::optional<Taint>& effective) {
  std::map<std::string, const Json*> by_ref;
  for (const auto& pod : in.pods) by_ref[kube::ref_string(pod)] = &pod;
  std::vector<std::string> going;
  std::vector<int64_t> grace;
  for (const auto& p : plan.pods) {
    const auto it = by_ref.find(p.pod);
    if (it == by_ref.end()) continue;
    if (p.action == PodAction::kReset && effective) {
      (kube::tolerates(kube::pod_tolerations(*it->second), *effective) ? plan.clients_tolerating
                                                                       : plan.clients_kept_off)
          .push_back(p.pod);
    }
    if (p.action == PodAction::kWait || p.action == PodAction::kReset || p.action == PodAction::kEvict) {
      going.push_back(p.pod);
      grace.push_back(kube::pod_grace_period_seconds(*it->second));
    }
  }
  plan.estimate = estimate_node(going, grace);
  plan.dra_claims_note = in.claims_note;
  if (!in.claims) return;
  for (const auto& pod : in.pods) {
    for (const Json* claim : gpu_claims_of(pod, *in.claims)) {
      plan.dra_claims.push_back({kube::ref_string(*claim), kube::ref_string(pod)});
    }
  }
}

}  // namespace dm::manager
