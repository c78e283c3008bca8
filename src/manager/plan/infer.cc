// `plan` off the node: the host facts inferred from the API, the driver pod that stands in for the host,
// and pod facts answered from lists read once (docs/plan.md, Off the node).
#include "manager/plan/infer.h"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "kube/objects.h"
#include "manager/rules/claims.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

constexpr std::string_view kDigestVar = "DRIVER_CONFIG_DIGEST";
constexpr std::string_view kManagerContainer = "k8s-driver-manager";

// DRIVER_CONFIG_DIGEST in the environment of any (init) container of a pod spec.
std::optional<std::string> digest_of(const Json& pod_spec) {
  for (const char* list : {"initContainers", "containers"}) {
    const Json* containers = kube::find(pod_spec, {list});
    if (containers == nullptr || !containers->is_array()) continue;
    for (const auto& c : *containers) {
      const Json* env = kube::find(c, {"env"});
      if (env == nullptr || !env->is_array()) continue;
      for (const auto& e : *env) {
        if (kube::string_at(e, {"name"}) == kDigestVar && e.contains("value") && e["value"].is_string())
          return e["value"].get<std::string>();
      }
    }
  }
  return std::nullopt;
}

bool has_manager_init_container(const Json& pod) {
  const Json* inits = kube::find(pod, {"spec", "initContainers"});
  if (inits == nullptr || !inits->is_array()) return false;
  for (const auto& c : *inits) {
    if (kube::string_at(c, {"name"}) == kManagerContainer) return true;
  }
  return false;
}

// The digest the run would compare with: DRIVER_CONFIG_DIGEST, else the driver DaemonSet template's.
std::pair<std::optional<std::string>, std::string> desired_digest(const Settings& settings,
                                                                  const Json& driver,
                                                                  const DaemonSetLookup& daemonset) {
  if (settings.driver_config_digest && !settings.driver_config_digest->empty())
    return {*settings.driver_config_digest, "DRIVER_CONFIG_DIGEST"};
  const auto owner = kube::controller_ref(driver);
  if (!owner || owner->kind != "DaemonSet" || !daemonset) return {std::nullopt, ""};
  const auto ds = daemonset(kube::namespace_of(driver), owner->name);
  const Json* spec = ds ? kube::find(*ds, {"spec", "template", "spec"}) : nullptr;
  if (spec == nullptr) return {std::nullopt, ""};
  return {digest_of(*spec), "the template of DaemonSet " + kube::namespace_of(driver) + "/" + owner->name};
}

SkipDecision skip_from_driver_pod(const Settings& settings, const Json& driver,
                                  const DaemonSetLookup& daemonset) {
  SkipDecision d;
  const std::string ref = kube::ref_string(driver);
  if (settings.force_reinstall) {
    d.summary = "FORCE_REINSTALL is set";
    return d;
  }
  d.checked = true;
  const auto [desired, source] = desired_digest(settings, driver, daemonset);
  const auto current = kube::find(driver, {"spec"}) != nullptr ? digest_of(driver["spec"]) : std::nullopt;
  if (!desired) {
    d.summary = "DRIVER_CONFIG_DIGEST is not set (nor in the driver DaemonSet's template)";
  } else if (!current) {
    d.summary = "the driver pod " + ref + " carries no DRIVER_CONFIG_DIGEST";
  } else if (!kube::pod_ready(driver)) {
    d.summary = "the driver pod " + ref + " is not ready: its install may not have finished";
  } else {
    d.skip = host::driver_config_matches(*desired, *current);
    d.summary = fmt::format("the driver pod's configuration digest ({}) {} {}", ref,
                            d.skip ? "equals that of" : "differs from that of", source);
  }
  return d;
}

}  // namespace

bool shaped_as_driver_pod(const Json& pod, const std::string& operator_namespace) {
  if (kube::namespace_of(pod) != operator_namespace || !kube::controlled_by_kind(pod, "DaemonSet"))
    return false;
  const Json* spec = kube::find(pod, {"spec"});
  return has_manager_init_container(pod) || (spec != nullptr && digest_of(*spec));
}

const Json* find_driver_pod(const std::vector<Json>& pods, const std::string& operator_namespace) {
  for (const auto& pod : pods) {
    if (!kube::pod_finished(pod) && shaped_as_driver_pod(pod, operator_namespace)) return &pod;
  }
  return nullptr;
}

bool is_on_node(const Settings& settings, const PlanInputs& in, const std::string& machine_hostname) {
  if (!settings.sim_root.empty()) return true;
  if (in.own_pod && kube::pod_node_name(in.own_pod->pod) == settings.node_name) return true;
  return !machine_hostname.empty() && machine_hostname == settings.node_name;
}

void infer_host_from_api(const Settings& settings, PlanInputs& in, const DaemonSetLookup& daemonset) {
  in.on_node = false;
  in.can_unload = {};
  in.nouveau_loaded = false;
  in.modules.clear();
  in.holders.clear();
  in.mounts.clear();
  in.mounts_error.clear();
  in.mellanox_device.reset();
  in.mofed_ready = false;
  in.host_driver_version.reset();
  if (kube::label(in.node, kDriverLabel) == std::string(kPreInstalledValue)) {
    in.host_driver_version = "version unknown";
    in.host_note = fmt::format("{}={}: a run found a driver installed on the host itself", kDriverLabel,
                               kPreInstalledValue);
    return;
  }
  const Json* driver = find_driver_pod(in.pods, settings.operator_namespace);
  if (driver == nullptr) {
    in.nvidia_loaded = false;
    in.skip = SkipDecision{};
    in.skip.summary = "no driver pod on the node";
    in.host_note =
        "no driver pod on the node (in " + settings.operator_namespace + "): no driver assumed loaded";
    return;
  }
  const std::string ref = kube::ref_string(*driver);
  in.nvidia_loaded = true;
  in.skip = skip_from_driver_pod(settings, *driver, daemonset);
  in.host_note = "the driver pod " + ref + " runs on the node: its driver assumed loaded and unloadable; " +
                 "skip decision from its digest";
  if (!in.own_pod) {
    OwnPod own;
    own.pod = *driver;
    own.ref = ref;
    own.uid = kube::uid(*driver);
    own.grace_period = std::chrono::seconds(kube::pod_grace_period_seconds(*driver));
    in.own_pod = std::move(own);
    in.own_pod_ref =
        OwnPodRef{kube::namespace_of(*driver), kube::name(*driver), "the driver pod on the node"};
    in.own_pod_error.clear();
  }
}

PodFacts listed_pod_facts(const std::shared_ptr<const std::vector<Json>>& daemonsets,
                          const std::shared_ptr<const std::vector<Json>>& claims) {
  PodFacts facts;
  if (daemonsets) {
    auto names = std::make_shared<std::map<std::string, bool>>();
    for (const auto& ds : *daemonsets) (*names)[kube::ref_string(ds)] = true;
    facts.daemonset_exists = [names](const std::string& ns, const std::string& name) -> Result<bool> {
      return names->count(ns + "/" + name) > 0;
    };
    auto templates = std::make_shared<std::map<std::string, const Json*>>();
    for (const auto& ds : *daemonsets) {
      if (const Json* t = kube::find(ds, {"spec", "template"})) (*templates)[kube::ref_string(ds)] = t;
    }
    facts.daemonset_template = [daemonsets, templates](const std::string& ns,
                                                       const std::string& name) -> std::optional<Json> {
      const auto it = templates->find(ns + "/" + name);
      return it != templates->end() ? std::optional<Json>(*it->second) : std::nullopt;
    };
  }
  if (claims) {
    facts.holds_gpu_claim = [claims](const Json& pod) -> Result<bool> {
      return !gpu_claims_of(pod, *claims).empty();
    };
    facts.claim_holds = [claims](const Json& pod) -> Result<std::vector<ClaimHold>> {
      std::vector<ClaimHold> out;
      for (const Json* claim : gpu_claims_of(pod, *claims)) out.push_back(claim_hold(pod, *claim));
      return out;
    };
  }
  return facts;
}

}  // namespace dm::manager
