#include "manager/plan.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "host/mounts.h"
#include "kube/config.h"
#include "kube/objects.h"
#include "manager/drain.h"
#include "manager/gpu_clients.h"
#include "manager/holders.h"
#include "manager/lease.h"
#include "manager/node_ops.h"
#include "manager/operands.h"
#include "manager/paused_record.h"
#include "manager/preflight.h"
#include "manager/taint_ops.h"
#include "manager/waits.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

// The pods of the node not yet taken by an earlier step, by ref; each step takes the ones it handles.
class PodLedger {
 public:
  explicit PodLedger(const std::vector<Json>& pods) {
    for (const auto& p : pods) order_.push_back(kube::ref_string(p)), pods_[kube::ref_string(p)] = p;
  }
  [[nodiscard]] std::vector<Json> remaining() const {
    std::vector<Json> out;
    for (const auto& ref : order_) {
      if (decided_.count(ref) == 0) out.push_back(pods_.at(ref));
    }
    return out;
  }
  void decide(PlanPod pod) {
    if (decided_.count(pod.pod) > 0) return;
    decided_[pod.pod] = std::move(pod);
  }
  // A reason for a pod no step takes (the most telling skip seen), kept until the end.
  void note_skip(const std::string& ref, const std::string& reason, bool strong) {
    if (reason.empty()) return;
    auto it = skip_reason_.find(ref);
    if (it == skip_reason_.end() || (strong && !strong_.count(ref))) {
      skip_reason_[ref] = reason;
      if (strong) strong_.insert(ref);
    }
  }
  [[nodiscard]] std::vector<PlanPod> finish(const std::string& default_reason) const {
    std::vector<PlanPod> out;
    for (const auto& ref : order_) {
      if (auto it = decided_.find(ref); it != decided_.end()) {
        out.push_back(it->second);
        continue;
      }
      auto r = skip_reason_.find(ref);
      out.push_back({ref, "ignored", "", r != skip_reason_.end() ? r->second : default_reason, {}});
    }
    return out;
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, Json> pods_;
  std::map<std::string, PlanPod> decided_;
  std::map<std::string, std::string> skip_reason_;
  std::set<std::string> strong_;
};

std::string on_off(bool b) {
  return b ? "on" : "off";
}

void add_labels(Plan& plan, const Json& patch, const Snapshot& snapshot, const std::string& batch) {
  if (!patch_has_labels(patch)) return;
  for (const auto& [key, value] : patch["metadata"]["labels"].items()) {
    plan.labels.push_back(
        {key, snapshot.value(key), value.is_string() ? value.get<std::string>() : "", batch});
  }
}

// The pods an operand wait waits for: taken as "wait" at `step`.
void take_operand_pods(PodLedger& ledger, const std::vector<OperandWait>& waits, const Settings& settings,
                       const std::string& step, const std::string& why) {
  for (const auto& pod : ledger.remaining()) {
    for (const auto& w : waits) {
      if (!pod_matches_wait(pod, w, settings.operator_namespace)) continue;
      ledger.decide({kube::ref_string(pod), "wait", step, w.description() + ": " + why, {}});
      break;
    }
  }
}

// One gpu-client phase: decisions of the client pipeline over the pods still on the node at that point.
// Returns the first look (for the taint rule); pods it evicts are added to `to_evict`.
PodPlan take_gpu_clients(PodLedger& ledger, const Settings& settings, GpuClientPhase phase,
                         const std::optional<Taint>& taint, const std::vector<std::string>& keys,
                         const std::string& step, std::vector<Json>& to_evict, Plan& plan) {
  const auto pods = ledger.remaining();
  PodPlan first = plan_pods(gpu_client_pipeline_for(settings, phase, taint, keys), pods);
  for (size_t i = 0; i < pods.size(); ++i) {
    const PodDecision& d = first.decisions[i];
    switch (d.verdict) {
      case Verdict::kDelete:
        ledger.decide(
            {d.pod, "reset", step,
             d.reason.empty() ? "designated GPU client: evicted while the taint keeps it off" : d.reason,
             d.warnings});
        to_evict.push_back(pods[i]);
        break;
      case Verdict::kWaitOnly:
        ledger.decide({d.pod, "wait", step, d.reason, d.warnings});
        break;
      case Verdict::kError:
        ledger.decide({d.pod, "refused", step, d.reason, d.warnings});
        break;
      case Verdict::kSkip:
        if (d.notice != Notice::kQuiet) ledger.note_skip(d.pod, "gpu-client: " + d.reason, true);
        break;
    }
  }
  if (!first.ok()) {
    plan.refusals.push_back(
        fmt::format("{}: refusing to reset the GPU client pods (nothing evicted by that "
                    "step; the paused labels are restored): {}",
                    step, fmt::join(first.errors, "; ")));
  }
  return first;
}

void plan_taint(Plan& plan, const Json& node, const Settings& settings, bool needed, bool refused,
                const std::optional<Taint>& taint) {
  plan.taint = settings.gpu_client_taint;
  if (!taint) {
    plan.taint_action = "none";
    plan.taint_reason = "GPU_CLIENT_TAINT does not parse";
    return;
  }
  if (!needed) {
    plan.taint_action = "none";
    plan.taint_reason =
        refused ? "the GPU client reset is refused before the node is tainted" : "no GPU client pod to reset";
    return;
  }
  const TaintAddPlan add = plan_taint_add(node, *taint);
  switch (add.outcome) {
    case TaintOutcome::kAdded:
      plan.taint_action = "add";
      plan.taint_reason =
          "keeps the reset GPU clients off the node until the driver is unloaded; removed at the end";
      break;
    case TaintOutcome::kAlreadyOurs:
      plan.taint_action = "already-ours";
      plan.taint_reason = "added by an earlier run of driver-manager; removed at the end";
      break;
    case TaintOutcome::kPresentNotOurs:
      plan.taint_action = "present-not-ours";
      plan.taint_reason = "a taint " + add.effective.to_string() +
                          " is already on the node and not ours: it keeps the clients off and stays";
      break;
  }
}

void plan_cordon(Plan& plan, const Json& node) {
  const bool cordoned = kube::node_unschedulable(node);
  if (cordoned_by_us(node)) {
    plan.cordon = "already-ours";
    plan.cordon_reason = "cordoned by an earlier run of driver-manager; uncordoned at the end";
  } else if (cordoned) {
    plan.cordon = "cordoned-by-other";
    plan.cordon_reason = "already cordoned by someone else: left cordoned";
  } else {
    plan.cordon = "cordon";
    plan.cordon_reason = "before evicting GPU pods; uncordoned at the end";
  }
}

void plan_leftovers(Plan& plan, const Json& node, const Snapshot& snapshot, bool will_unload) {
  if (auto owned = taint_owner_annotation(node)) {
    plan.leftovers.push_back(
        "taint " + *owned + " of an earlier run: " +
        (will_unload ? "kept on until the driver is unloaded, then removed" : "removed at the start"));
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
  if (auto lease = lease_of(node)) {
    const auto now = std::chrono::system_clock::now();
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
  if (!in.can_unload) {
    plan.unload = "never: " + in.can_unload.error().message;
  } else if (!in.nvidia_loaded) {
    plan.unload = "nothing to unload: nvidia is not loaded";
  } else if (!in.holders.empty()) {
    plan.unload = "busy now: held by the processes below (the run unloads only once they are gone)";
  } else {
    plan.unload = "possible now: no process holds the driver";
  }
}

void unload_step(Plan& plan) {
  plan.steps.emplace_back("unload the NVIDIA kernel modules (all or nothing), unmount " +
                          std::string(host::kDriverRoot) + ", remove the driver's pid file");
  if (plan.auto_drain) {
    plan.steps.emplace_back(
        "if the unload fails: cordon, drain the node (full-drain fallback), retry the unload");
  }
}

void vfio_mofed_steps(Plan& plan, const Settings& settings, const PlanInputs& in) {
  plan.steps.emplace_back("unbind vfio-pci from all devices (vfio-manage unbind --all)");
  if (!settings.gpu_direct_rdma_enabled) return;
  plan.steps.emplace_back(in.mellanox_device
                              ? "wait for MOFED (Mellanox device " + *in.mellanox_device + ", " +
                                    (in.mofed_ready ? "ready now" : "not ready now") + ")"
                              : "MOFED: no Mellanox device, no wait");
}

}  // namespace

Plan build_plan(const Settings& settings, const PlanInputs& in) {
  Plan plan;
  plan.node = settings.node_name;
  const auto table = operand_table(settings.node_label_for_gpu_pod_eviction);
  const Snapshot snapshot = take_snapshot(in.node, table);
  plan.upgrade_policy = snapshot.policy_enabled();
  const EvictionSwitches switches = eviction_switches(settings, plan.upgrade_policy);
  plan.gpu_pod_eviction = switches.gpu_pod_eviction;
  plan.auto_drain = switches.auto_drain;
  plan_host(plan, in);
  const auto taint = parse_taint(settings.gpu_client_taint);
  const std::optional<Taint> configured = taint ? std::optional<Taint>(*taint) : std::nullopt;

  // The own pod, as the run's preflight finds it.
  if (in.own_pod) {
    plan.own_pod = in.own_pod->ref;
    plan.own_pod_note = in.own_pod_ref ? "found as " + in.own_pod_ref->source : "";
    if (configured) plan.own_pod_tolerates = !check_tolerates_taint(*in.own_pod, *configured).has_value();
  } else if (!in.own_pod_error.empty()) {
    plan.own_pod_note = in.own_pod_error;
  } else {
    plan.own_pod_note =
        "not found (" +
        (in.own_pod_ref ? in.own_pod_ref->ns + "/" + in.own_pod_ref->name + " from " + in.own_pod_ref->source
                        : std::string("no POD_NAME or HOSTNAME")) +
        "): not running in a pod, no toleration check";
  }

  PodLedger ledger(in.pods);
  if (in.own_pod) ledger.decide({in.own_pod->ref, "ignored", "", "this program's own pod", {}});
  std::vector<Json> to_evict;
  plan.taint = settings.gpu_client_taint;
  plan.taint_action = "none";
  plan.taint_reason = "this path resets no GPU client";
  plan.cordon = "none";
  plan.cordon_reason = "this path evicts no GPU pod";

  // The paths, in the order uninstall_driver tries them (docs/behaviour.md, The paths).
  if (in.host_driver_version) {
    plan.path = "pre-installed";
    plan.path_reason =
        "a driver is installed on the host itself (nvidia-smi: " + *in.host_driver_version + ")";
    plan.labels.push_back({std::string(kDriverLabel), kube::label(in.node, kDriverLabel).value_or(""),
                           std::string(kPreInstalledValue), "pre-installed"});
    plan.steps.push_back("label the node " + std::string(kDriverLabel) + "=" +
                         std::string(kPreInstalledValue) + " (the driver DaemonSet leaves the node)");
    plan.steps.push_back("wait " + format_duration(settings.pre_installed_sleep) +
                         " to be removed, then exit 1 (driver is pre-installed on host)");
    plan.pods = ledger.finish("the pre-installed path touches no pod");
    return plan;
  }
  if (refuse_for_unloadable_driver(in.can_unload, in.skip)) {
    plan.refusals.push_back("before any write: " + in.can_unload.error().message);
  }
  if (plan.own_pod_tolerates && !*plan.own_pod_tolerates && configured) {
    plan.refusals.push_back("before any write: " + check_tolerates_taint(*in.own_pod, *configured)->message);
  }
  if (!taint) plan.refusals.push_back("before any write: GPU_CLIENT_TAINT: " + taint.error().message);
  plan_leftovers(plan, in.node, snapshot, in.nvidia_loaded);
  if (!plan.refusals.empty()) {
    plan.path = "refused";
    plan.path_reason = "the run would stop before changing anything";
    plan.pods = ledger.finish("the run stops before touching any pod");
    return plan;
  }

  if (!in.nvidia_loaded) {
    plan.path = "no-driver";
    plan.path_reason = "no NVIDIA driver loaded: nothing holds it, so nothing is evicted";
    if (snapshot.dra_on()) {
      add_labels(plan, plugin_patch(snapshot, table), snapshot, "dra-plugin");
      take_operand_pods(ledger, plugin_waits(snapshot, table), settings, "dra-plugin",
                        "waited for after its label is paused");
      plan.steps.emplace_back("pause the DRA kubelet-plugin label and wait for its pods");
    }
    plan.steps.emplace_back("unmount a stale " + std::string(host::kDriverRoot));
    if (in.nouveau_loaded) plan.steps.emplace_back("unload nouveau");
    vfio_mofed_steps(plan, settings, in);
    plan.steps.emplace_back("restore labels left paused by an earlier run, undo its cordon");
    plan.pods = ledger.finish("the no-driver path evicts nothing");
    return plan;
  }

  // Pause the operands and wait for their pods; the annotated GPU clients go with them.
  add_labels(plan, pause_patch(snapshot, table), snapshot, "pause");
  if (!plan.labels.empty()) plan.steps.emplace_back("pause the operand labels (restored at the end)");
  const auto waits = pause_waits(snapshot, table);
  if (!waits.empty()) {
    plan.steps.push_back(fmt::format("wait for the operand pods to go (OPERAND_WAIT_TIMEOUT {})",
                                     format_duration(settings.operand_wait_timeout)));
  }
  take_operand_pods(ledger, waits, settings, "operands", "its node label is paused");
  const auto keys = label_handled_client_keys(snapshot, settings.node_label_for_gpu_pod_eviction);
  const std::optional<Taint> effective =
      configured ? std::optional<Taint>(plan_taint_add(in.node, *configured).effective) : std::nullopt;
  const PodPlan clients = take_gpu_clients(ledger, settings, GpuClientPhase::kWithOperands, effective, keys,
                                           "gpu-clients", to_evict, plan);
  bool needs_taint = client_reset_needs_taint(clients);
  if (needs_taint) {
    plan.steps.emplace_back(
        "taint the node and reset the annotated GPU client pods (GPU_CLIENT_EVICTION_TIMEOUT " +
        format_duration(settings.gpu_client_eviction_timeout) + ")");
  }

  plan.skip = in.skip.summary;
  if (in.skip.skip) {
    plan.path = "skip";
    plan.path_reason = "the loaded driver is kept: " + in.skip.summary;
    if (snapshot.dra_on()) {
      add_labels(plan, plugin_patch(snapshot, table), snapshot, "dra-plugin");
      take_operand_pods(ledger, plugin_waits(snapshot, table), settings, "dra-plugin",
                        "waited for after its label is paused");
      plan.steps.emplace_back("pause the DRA kubelet-plugin label and wait for its pods");
    }
    plan.steps.emplace_back("unmount a stale " + std::string(host::kDriverRoot) +
                            ", remove stale state files");
    plan.steps.emplace_back("restore the labels, remove the taint, undo our cordon");
    plan_taint(plan, in.node, settings, needs_taint, !clients.ok(), configured);
    plan.pods = ledger.finish("the skip path keeps GPU workloads and other pods running");
    plan.pdbs = in.pdbs ? pdb_impacts(*in.pdbs, in.pdb_version, to_evict) : std::vector<PdbImpact>{};
    plan.pdb_note = in.pdb_error;
    return plan;
  }
  plan.path = "full";
  plan.path_reason = "the loaded driver is uninstalled: " + in.skip.summary;

  // GPU workloads.
  if (workload_step_runs(switches, snapshot.dra_on())) {
    plan_cordon(plan, in.node);
    plan.steps.push_back("cordon the node and evict the GPU pods (DRAIN_TIMEOUT_SECONDS " +
                         (settings.drain_timeout == Duration::zero()
                              ? std::string("0, no limit")
                              : format_duration(settings.drain_timeout)) +
                         ")");
    const auto pods = ledger.remaining();
    auto planned = plan_gpu_workload_eviction(pods, drain_options(settings), in.facts);
    if (!planned) {
      plan.notes.push_back("GPU pods: " + planned.error().message);
    } else {
      for (size_t i = 0; i < pods.size(); ++i) {
        const PodDecision& d = planned->plan.decisions[i];
        if (d.verdict == Verdict::kDelete) {
          ledger.decide(
              {d.pod, "evict", "gpu-workloads", d.reason.empty() ? "GPU pod" : d.reason, d.warnings});
          to_evict.push_back(pods[i]);
        } else if (d.filter != "gpu") {
          ledger.decide(
              {d.pod, "refused", "gpu-workloads", "GPU pod cannot be evicted: " + d.reason, d.warnings});
        } else {
          ledger.note_skip(d.pod, d.reason, false);
        }
      }
      if (!planned->plan.ok()) {
        plan.refusals.push_back(fmt::format("gpu-workloads: Cannot delete all GPU pods ({}){}",
                                            fmt::join(planned->plan.errors, "; "),
                                            switches.auto_drain ? "; the run falls back to draining the node"
                                                                : "; the run fails and restores the node"));
      }
    }
  } else {
    plan.cordon_reason =
        plan.upgrade_policy ? "the GPU Operator's upgrade policy owns the cordon" : "GPU pod eviction is off";
    // Nobody evicts them: a GPU pod still running holds the driver and the unload fails.
    for (const auto& pod : ledger.remaining()) {
      if (!kube::pod_declares_gpu_resource(pod)) continue;
      ledger.decide({kube::ref_string(pod),
                     "ignored",
                     "gpu-workloads",
                     plan.upgrade_policy
                         ? "GPU pod: the GPU Operator's upgrade policy evicts workloads, not driver-manager"
                         : "GPU pod: ENABLE_GPU_POD_EVICTION and ENABLE_AUTO_DRAIN are off",
                     {}});
    }
  }

  if (snapshot.dra_on()) plan.steps.emplace_back("check that no pod still holds a GPU resource claim");
  const PodPlan dra_clients = take_gpu_clients(ledger, settings, GpuClientPhase::kDraPlugin, effective, keys,
                                               "dra-plugin-clients", to_evict, plan);
  if (client_reset_needs_taint(dra_clients)) {
    if (!needs_taint) plan.steps.emplace_back("taint the node");
    needs_taint = true;
    plan.steps.emplace_back("reset the GPU client pods that are DRA kubelet plugins");
  }
  if (snapshot.dra_on()) {
    add_labels(plan, plugin_patch(snapshot, table), snapshot, "dra-plugin");
    take_operand_pods(ledger, plugin_waits(snapshot, table), settings, "dra-plugin",
                      "waited for after its label is paused");
    plan.steps.emplace_back("pause the DRA kubelet-plugin label and wait for its pods");
  }
  unload_step(plan);
  vfio_mofed_steps(plan, settings, in);
  plan.steps.emplace_back("remove the taint, uncordon (if ours), restore the operand labels");
  if (in.nouveau_loaded) plan.steps.emplace_back("unload nouveau");

  plan_taint(plan, in.node, settings, needs_taint, !clients.ok(), configured);
  plan.pods = ledger.finish("not an operand, GPU client or GPU workload: stays");
  plan.pdbs = in.pdbs ? pdb_impacts(*in.pdbs, in.pdb_version, to_evict) : std::vector<PdbImpact>{};
  plan.pdb_note = in.pdb_error;
  return plan;
}

namespace {

std::string read_error(const std::string& what, const Error& e) {
  if (e.forbidden()) {
    return what + ": forbidden (" + e.message + ")";
  }
  return what + ": " + e.message;
}

// Mount points under the driver root, shown as host paths (a simulated host's root prefix dropped).
void read_mounts(host::Host& host, PlanInputs& in) {
  const std::string root = host.path(host::kDriverRoot);
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) return;
  auto mounts = host::mounts_under(root);
  if (!mounts) {
    in.mounts_error = "cannot read the mount table: " + mounts.error().message;
    return;
  }
  const std::string canonical = std::filesystem::weakly_canonical(root, ec).string();
  for (const auto& m : *mounts) {
    in.mounts.push_back(
        m.rfind(canonical, 0) == 0 ? std::string(host::kDriverRoot) + m.substr(canonical.size()) : m);
  }
  std::reverse(in.mounts.begin(), in.mounts.end());  // outermost first, as they were mounted
}

}  // namespace

Result<PlanInputs> read_plan_inputs(const Settings& settings, kube::Client& client, host::Host& host) {
  PlanInputs in;
  auto node = client.get(kube::paths::node(settings.node_name));
  if (!node) {
    if (node.error().not_found()) {
      return Error("node \"" + settings.node_name +
                   "\" not found: set NODE_NAME (--node-name) to the name of a Kubernetes node");
    }
    return Error(read_error("cannot read node \"" + settings.node_name + "\"", node.error()));
  }
  in.node = std::move(*node);

  kube::ListOptions opts;
  opts.field_selector = "spec.nodeName=" + settings.node_name;
  auto pods = client.list_all(kube::paths::pods(), opts);
  if (!pods) return Error(read_error("cannot list the pods of node " + settings.node_name, pods.error()));
  in.pods = std::move(*pods);
  std::sort(in.pods.begin(), in.pods.end(),
            [](const Json& a, const Json& b) { return kube::ref_string(a) < kube::ref_string(b); });
  in.facts = api_pod_facts(client);

  in.own_pod_ref =
      own_pod_ref(settings.pod_name, settings.pod_namespace, settings.hostname, settings.operator_namespace);
  if (auto own = find_own_pod(client, in.own_pod_ref); !own) {
    in.own_pod_error = read_error("cannot read this program's own pod", own.error());
  } else if (own->has_value()) {
    in.own_pod = std::move(**own);
  }

  // policy/v1 since Kubernetes 1.21; older API servers serve only v1beta1.
  for (const std::string version : {"v1", "v1beta1"}) {
    auto pdbs = client.list_all(kube::paths::pod_disruption_budgets(version));
    if (pdbs) {
      in.pdbs = std::move(*pdbs);
      in.pdb_version = version;
      in.pdb_error.clear();
      break;
    }
    in.pdb_error =
        read_error("cannot list PodDisruptionBudgets", pdbs.error()) +
        (pdbs.error().forbidden() ? ": which budgets would block the evictions is unknown (allow list on "
                                    "policy/poddisruptionbudgets to see them)"
                                  : "");
    if (!pdbs.error().not_found()) break;
  }

  in.host_driver_version = host.host_driver_version();
  in.can_unload = host.can_unload_nvidia();
  in.nvidia_loaded = host.module_loaded("nvidia");
  in.nouveau_loaded = host.module_loaded("nouveau");
  for (const auto name : host::kNvidiaModules) {
    if (!host.module_loaded(name)) continue;
    if (auto st = host.module_state(name)) in.modules.push_back(std::move(*st));
  }
  in.holders = host.nvidia_holder_processes();
  read_mounts(host, in);
  in.skip = decide_skip_uninstall(settings, host);
  if (settings.gpu_direct_rdma_enabled) {
    in.mellanox_device = host.first_mellanox_device();
    in.mofed_ready = host.mofed_ready(settings.use_host_mofed);
  }
  return in;
}

namespace {

std::string or_absent(const std::string& v) {
  return v.empty() ? "<absent>" : v;
}

void section(std::string& out, const std::string& title) {
  out += "\n" + title + "\n";
}

}  // namespace

std::string render_plan_text(const Plan& p) {
  std::string out;
  out += fmt::format("Plan for node {} (nothing was changed)\n", p.node);
  out += fmt::format("Path: {} - {}\n", p.path, p.path_reason);
  out += fmt::format("Upgrade policy: {}; GPU pod eviction: {}; auto drain: {}\n", on_off(p.upgrade_policy),
                     on_off(p.gpu_pod_eviction), on_off(p.auto_drain));
  if (!p.skip.empty()) out += "Skip decision: " + p.skip + "\n";
  if (!p.refusals.empty()) {
    section(out, "Would fail:");
    for (const auto& r : p.refusals) out += "  " + r + "\n";
  }
  section(out, "Steps:");
  for (size_t i = 0; i < p.steps.size(); ++i) out += fmt::format("  {}. {}\n", i + 1, p.steps[i]);

  section(out, "Node labels:");
  if (p.labels.empty()) out += "  (none written)\n";
  for (const auto& l : p.labels) {
    out += fmt::format("  {} {} -> {} ({})\n", l.key, or_absent(l.from), l.to, l.batch);
  }
  section(out, "Taint:");
  out += fmt::format("  {}: {} - {}\n", p.taint, p.taint_action, p.taint_reason);
  out += "  own pod: " +
         (p.own_pod.empty() ? p.own_pod_note
                            : p.own_pod + " (" + p.own_pod_note + "), " +
                                  (p.own_pod_tolerates.value_or(false) ? "tolerates the taint"
                                                                       : "does NOT tolerate the taint")) +
         "\n";
  section(out, "Cordon:");
  out += "  " + p.cordon + (p.cordon_reason.empty() ? "" : " - " + p.cordon_reason) + "\n";

  section(out, "Pods:");
  size_t w_pod = 3;
  size_t w_action = 6;
  size_t w_step = 4;
  for (const auto& pod : p.pods) {
    w_pod = std::max(w_pod, pod.pod.size());
    w_action = std::max(w_action, pod.action.size());
    w_step = std::max(w_step, pod.step.size());
  }
  out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", "POD", w_pod, "ACTION", w_action, "STEP", w_step,
                     "REASON");
  for (const auto& pod : p.pods) {
    out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", pod.pod, w_pod, pod.action, w_action,
                       pod.step.empty() ? "-" : pod.step, w_step, pod.reason);
    for (const auto& w : pod.warnings)
      out += fmt::format("  {:<{}}  warning: {}\n", "", w_pod + w_action + w_step + 4, w);
  }
  if (p.pods.empty()) out += "  (no pods on the node)\n";

  section(out, "PodDisruptionBudgets:");
  if (!p.pdb_note.empty()) out += "  " + p.pdb_note + "\n";
  for (const auto& b : p.pdbs) {
    out += fmt::format("  {} {} ({}): {}\n", b.pdb, b.blocks ? "BLOCKS" : "allows", fmt::join(b.pods, ", "),
                       b.why);
  }
  if (p.pdb_note.empty() && p.pdbs.empty()) out += "  none covers a pod to evict\n";

  section(out, "Host:");
  out += "  host driver: " + (p.host_driver_version.empty() ? std::string("none") : p.host_driver_version) +
         "\n";
  out += "  nvidia loaded: " + std::string(p.nvidia_loaded ? "yes" : "no") + "; unload: " + p.unload + "\n";
  for (const auto& m : p.modules) {
    out += fmt::format("  module {}: refcount {}{}{}\n", m.name, m.refcount,
                       m.holders.empty() ? "" : fmt::format(", used by {}", fmt::join(m.holders, ",")),
                       m.users.empty() ? "" : fmt::format(", open by {}", fmt::join(m.users, ", ")));
  }
  for (const auto& h : p.holders) out += "  " + h + "\n";
  out += "  mounts under " + std::string(host::kDriverRoot) + ": " +
         (p.mounts.empty() ? (p.mounts_note.empty() ? std::string("none") : p.mounts_note)
                           : fmt::format("{}", fmt::join(p.mounts, ", "))) +
         "\n";
  if (!p.leftovers.empty()) {
    section(out, "Left by earlier runs:");
    for (const auto& l : p.leftovers) out += "  " + l + "\n";
  }
  if (!p.notes.empty()) {
    section(out, "Notes:");
    for (const auto& n : p.notes) out += "  " + n + "\n";
  }
  return out;
}

Json plan_to_json(const Plan& p) {
  Json j;
  j["node"] = p.node;
  j["path"] = p.path;
  j["pathReason"] = p.path_reason;
  j["refusals"] = p.refusals;
  j["steps"] = p.steps;
  j["upgradePolicy"] = p.upgrade_policy;
  j["gpuPodEviction"] = p.gpu_pod_eviction;
  j["autoDrain"] = p.auto_drain;
  j["skipDecision"] = p.skip;
  j["labels"] = Json::array();
  for (const auto& l : p.labels) {
    j["labels"].push_back({{"key", l.key}, {"from", l.from}, {"to", l.to}, {"batch", l.batch}});
  }
  j["taint"] = {{"taint", p.taint}, {"action", p.taint_action}, {"reason", p.taint_reason}};
  j["ownPod"] = {{"pod", p.own_pod}, {"note", p.own_pod_note}};
  j["ownPod"]["toleratesTaint"] = p.own_pod_tolerates ? Json(*p.own_pod_tolerates) : Json(nullptr);
  j["cordon"] = {{"action", p.cordon}, {"reason", p.cordon_reason}};
  j["pods"] = Json::array();
  for (const auto& pod : p.pods) {
    j["pods"].push_back({{"pod", pod.pod},
                         {"action", pod.action},
                         {"step", pod.step},
                         {"reason", pod.reason},
                         {"warnings", pod.warnings}});
  }
  j["podDisruptionBudgets"] = Json::array();
  for (const auto& b : p.pdbs) {
    j["podDisruptionBudgets"].push_back({{"pdb", b.pdb},
                                         {"pods", b.pods},
                                         {"disruptionsAllowed", b.disruptions_allowed},
                                         {"blocks", b.blocks},
                                         {"reason", b.why}});
  }
  j["podDisruptionBudgetsNote"] = p.pdb_note;
  Json host;
  host["hostDriverVersion"] = p.host_driver_version;
  host["nvidiaLoaded"] = p.nvidia_loaded;
  host["unload"] = p.unload;
  host["modules"] = Json::array();
  for (const auto& m : p.modules) {
    host["modules"].push_back(
        {{"name", m.name}, {"refcount", m.refcount}, {"usedBy", m.holders}, {"openBy", m.users}});
  }
  host["holders"] = p.holders;
  host["mounts"] = p.mounts;
  host["mountsNote"] = p.mounts_note;
  j["host"] = host;
  j["leftovers"] = p.leftovers;
  j["notes"] = p.notes;
  return j;
}

int run_plan(const Settings& in_settings, const std::string& output) {
  Settings settings = in_settings;
  fill_pod_identity_from_env(settings);
  if (settings.node_name.empty()) {
    spdlog::critical("NODE_NAME (--node-name) is empty: set it to the name of a Kubernetes node");
    return 1;
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "";
  // vfio-manage only runs on the node: its absence here (say, on an operator's laptop) is a note, not an
  // error; every other bad setting is refused as uninstall_driver refuses it.
  Settings checked = settings;
  const bool vfio_found = !resolve_executable(settings.vfio_manage, path).empty();
  if (!vfio_found) checked.vfio_manage = "/proc/self/exe";
  if (auto problems = settings_problems(checked, path); !problems.empty()) {
    for (const auto& pr : problems) spdlog::critical("{}", pr);
    return 1;
  }
  auto config = kube::load_config(settings.kubeconfig);
  if (!config) {
    spdlog::critical("cannot load the Kubernetes client configuration: {}", config.error().message);
    return 1;
  }
  auto client = kube::Client::create(*config);
  if (!client) {
    spdlog::critical("cannot create the Kubernetes client for {}: {}", config->source,
                     client.error().message);
    return 1;
  }
  auto host = host::make_host(settings.sim_root);
  auto inputs = read_plan_inputs(settings, **client, *host);
  if (!inputs) {
    spdlog::critical("plan failed: {} (with {})", inputs.error().message, config->source);
    return 1;
  }
  Plan plan = build_plan(settings, *inputs);
  if (!vfio_found) {
    plan.notes.push_back("VFIO_MANAGE_PATH=\"" + settings.vfio_manage +
                         "\": no such executable here; a run on the node refuses to start without it");
  }
  const std::string text = output == "json" ? plan_to_json(plan).dump(2) + "\n" : render_plan_text(plan);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace dm::manager
