#include "manager/pods/drain.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <optional>

#include "manager/pods/eviction.h"
#include "manager/rules/claims.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

// One GET per RuntimeClass named; a class that does not exist or may not be read is said once.
RuntimeClassLookup runtime_class_lookup(kube::Api& client) {
  auto known = std::make_shared<std::map<std::string, RuntimeClassInfo>>();
  return [&client, known](const std::string& name) -> Result<RuntimeClassInfo> {
    if (auto it = known->find(name); it != known->end()) return it->second;
    auto rc = client.get(kube::paths::runtime_class(name));
    if (rc) return (*known)[name] = RuntimeClassInfo::found(kube::string_at(*rc, {"handler"}));
    if (rc.error().forbidden()) {
      // The GPU Operator's stock role does not grant it: the toolkit's own class names still count.
      if (is_nvidia_runtime_class_name(name)) {
        spdlog::warn(
            "Cannot read RuntimeClass \"{}\" ({}): pods naming it are counted as GPU pods by its name, the "
            "name the NVIDIA Container Toolkit gives its class; grant get on runtimeclasses (node.k8s.io) "
            "to judge them by its handler",
            name, rc.error().message);
      } else {
        spdlog::warn(
            "Cannot read RuntimeClass \"{}\" ({}): pods naming it are not counted as GPU pods through it; "
            "grant get on runtimeclasses (node.k8s.io) to count them",
            name, rc.error().message);
      }
      return (*known)[name] = RuntimeClassInfo::unreadable();
    }
    if (!rc.error().not_found()) return rc.error().wrap("failed to look up RuntimeClass " + name);
    spdlog::warn("RuntimeClass \"{}\" does not exist: pods naming it are not counted as GPU pods through it",
                 name);
    return (*known)[name] = RuntimeClassInfo::missing();
  };
}

}  // namespace

PodFacts api_pod_facts(kube::Api& client) {
  PodFacts facts;
  facts.daemonset_exists = [&client](const std::string& ns, const std::string& name) -> Result<bool> {
    auto r = client.get(kube::paths::daemonset(ns, name));
    if (r) return true;
    if (r.error().not_found()) return false;
    return r.error().wrap("failed to look up DaemonSet " + ns + "/" + name);
  };
  facts.holds_gpu_claim = [&client](const Json& pod) -> Result<bool> {
    const std::string ns = pod["metadata"].value("namespace", "");
    for (const auto& name : claim_names(pod)) {
      auto claim = client.get(kube::paths::resource_claim(ns, name));
      if (!claim) {
        // 404: the claim is gone, or the cluster has no resource.k8s.io/v1 (claims are then ignored).
        if (claim.error().not_found()) continue;
        return claim.error().wrap(
            fmt::format("failed to look up ResourceClaim {}/{} of pod {}", ns, name, kube::ref_string(pod)));
      }
      if (is_allocated_gpu_claim(*claim)) return true;
    }
    return false;
  };
  facts.claim_holds = [&client](const Json& pod) -> Result<std::vector<ClaimHold>> {
    std::vector<ClaimHold> out;
    const std::string ns = kube::namespace_of(pod);
    for (const auto& name : claim_names(pod)) {
      auto claim = client.get(kube::paths::resource_claim(ns, name));
      if (!claim) {
        if (claim.error().not_found()) continue;
        return claim.error().wrap(
            fmt::format("failed to look up ResourceClaim {}/{} of pod {}", ns, name, kube::ref_string(pod)));
      }
      if (is_allocated_gpu_claim(*claim)) out.push_back(claim_hold(pod, *claim));
    }
    return out;
  };
  facts.runtime_class_handler = runtime_class_lookup(client);
  facts.daemonset_template = [&client](const std::string& ns,
                                       const std::string& name) -> std::optional<Json> {
    auto ds = client.get(kube::paths::daemonset(ns, name));
    const Json* t = ds ? kube::find(*ds, {"spec", "template"}) : nullptr;
    if (t == nullptr) {
      spdlog::debug(
          "Cannot read the pod template of DaemonSet {}/{} ({}): its pods are placed by their own spec", ns,
          name, ds ? "none in it" : ds.error().message);
      return std::nullopt;
    }
    return *t;
  };
  return facts;
}

Deadline drain_deadline(const DrainContext& ctx) {
  return ctx.settings.drain_timeout == Duration::zero()
             ? Deadline::none()
             : Deadline::after(ctx.clock, ctx.settings.drain_timeout);
}

namespace {

void log_decisions(const PodListDecision& decision) {
  for (const auto& d : decision.decisions) {
    if (d.notice == Notice::kWarning) {
      spdlog::warn("{}", d.log_line());
    } else if (d.verdict == Verdict::kSkip) {
      spdlog::debug("{}", d.log_line());
    } else {
      spdlog::info("{}", d.log_line());
    }
  }
}

EvictionOptions eviction_options(const DrainContext& ctx, std::string what) {
  EvictionOptions o;
  o.what = std::move(what);
  o.retry_interval = ctx.settings.eviction_retry_interval;
  return o;  // the pod's own grace period, as `kubectl drain` and upstream's GPU-pod eviction
}

}  // namespace

DrainOptions drain_options(const Settings& settings) {
  DrainOptions o;
  o.force = settings.drain_use_force;
  o.delete_emptydir_data = settings.drain_delete_emptydir_data;
  return o;
}

EvictionSwitches eviction_switches(const Settings& settings, bool upgrade_policy_enabled) {
  return {!upgrade_policy_enabled && settings.enable_gpu_pod_eviction,
          !upgrade_policy_enabled && settings.enable_auto_drain};
}

Status evict_gpu_workloads(const DrainContext& ctx, const TakenBeside& beside,
                           std::vector<std::string>* evicted_uids) {
  // Upstream logs both: the first from its flow, the second from its Kubernetes client.
  spdlog::info("Draining node {} of any GPU pods...", ctx.node.node());
  spdlog::info("Draining node {} of any GPU pods", ctx.node.node());
  spdlog::info("Identifying GPU pods to delete");
  const auto facts = api_pod_facts(ctx.client);
  auto pods = ctx.pods.snapshot();  // shared with the cache: only the pods the decision keeps are copied
  if (beside) {
    std::erase_if(pods, [&](const std::shared_ptr<const Json>& pod) {
      const auto why = beside(*pod);
      if (why) spdlog::debug("{}: skip [beside]: {}", kube::ref_string(*pod), *why);
      return why.has_value();
    });
  }
  auto decided = decide_gpu_workload_eviction(pods, drain_options(ctx.settings), facts);
  if (!decided) return decided.error().wrap("failed to identify GPU pods");
  const auto& decision = decided->pods;
  if (decided->gpu_pods == 0) {
    spdlog::info("No GPU pods to delete. Exiting.");
    return ok_status();
  }
  log_decisions(decision);
  if (!decision.ok()) {
    spdlog::error("Cannot delete all GPU pods");
    for (const auto& e : decision.errors) spdlog::error("error reported by drain helper: {}", e);
    return Error("cannot evict every GPU pod on node " + ctx.node.node() + ": " +
                 fmt::format("{}", fmt::join(decision.errors, "; ")));
  }
  for (const auto& p : decision.to_evict) spdlog::info("GPU pod - {}", kube::ref_string(p));
  for (const auto& p : decision.to_wait)
    spdlog::info("GPU pod - {} (already terminating)", kube::ref_string(p));
  spdlog::info("Deleting GPU pods...");
  const auto targets = targets_of(decision);
  if (evicted_uids != nullptr) {
    for (const auto& t : targets) evicted_uids->push_back(t.uid);
  }
  auto s = evict_pods(ctx.client, ctx.pods, ctx.clock, targets, drain_deadline(ctx), ctx.cancel,
                      eviction_options(ctx, "GPU pods"));
  if (!s) return s.error().wrap("failed to evict GPU pods from node " + ctx.node.node());
  return ok_status();
}

Status drain_node(const DrainContext& ctx) {
  auto selector = LabelSelector::parse(ctx.settings.drain_pod_selector_label);
  if (!selector) return selector.error().wrap("invalid DRAIN_POD_SELECTOR_LABEL");
  spdlog::info("Draining node {}", ctx.node.node());
  spdlog::info("Draining ignores DaemonSet pods{}",
               selector->empty() ? "" : "; only pods matching \"" + selector->text() + "\" are drained");
  const auto facts = api_pod_facts(ctx.client);
  const auto decision =
      decide_pods(full_drain_pipeline(drain_options(ctx.settings), *selector, facts), ctx.pods.snapshot());
  log_decisions(decision);
  if (!decision.ok()) {
    for (const auto& e : decision.errors) spdlog::error("error reported by drain helper: {}", e);
    return Error("cannot drain node " + ctx.node.node() + ": " +
                 fmt::format("{}", fmt::join(decision.errors, "; ")));
  }
  auto s = evict_pods(ctx.client, ctx.pods, ctx.clock, targets_of(decision), drain_deadline(ctx), ctx.cancel,
                      eviction_options(ctx, "pods of the drained node"));
  if (!s) return s.error().wrap("failed to drain node " + ctx.node.node());
  spdlog::info("Node {} drained", ctx.node.node());
  return ok_status();
}

Status check_dra_claim_holders(const DrainContext& ctx) {
  spdlog::info("Checking that no pod on the node still holds a GPU resource claim");
  const auto facts = api_pod_facts(ctx.client);
  std::vector<std::string> holders;
  for (const auto& shared : ctx.pods.snapshot()) {
    const Json& pod = *shared;
    if (kube::pod_finished(pod) || claim_names(pod).empty()) continue;
    auto holds = facts.holds_gpu_claim(pod);
    if (!holds) return holds.error();
    if (*holds) holders.push_back(kube::ref_string(pod));
  }
  if (holders.empty()) return ok_status();
  std::string list;
  for (const auto& h : holders) list += (list.empty() ? "" : ", ") + h;
  return Error("cannot drain the DRA kubelet-plugin: pod(s) still hold GPU resource claims: " + list);
}

}  // namespace dm::manager
