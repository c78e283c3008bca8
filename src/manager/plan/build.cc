// build_plan: the run's own path and steps (manager/commands/flow_steps), each step rendered by its own row
// (manager/commands/step_def.h) through the plan being built, with the pods it would take, in the order the
// run takes them.
#include "manager/plan/build.h"

#include <fmt/format.h>

#include <chrono>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "manager/commands/preflight.h"
#include "manager/commands/step_def.h"
#include "manager/node/lease.h"
#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "manager/plan/ledger.h"
#include "manager/plan/parts.h"
#include "manager/plan/render.h"
#include "manager/pods/drain.h"
#include "manager/pods/gpu_clients.h"
#include "manager/pods/holders.h"
#include "manager/pods/waits.h"
#include "manager/rules/dra_helpers.h"
#include "manager/rules/dra_plugin.h"
#include "manager/rules/operands.h"
#include "manager/rules/paused_record.h"

namespace dm::manager {

namespace {

using Json = nlohmann::json;
using kube::Taint;

// The plan being built: what every step's rendering reads (StepPlan), and what the steps before it took.
class PlanBuilder final : public StepPlan {
 public:
  PlanBuilder(const Settings& settings, const PlanInputs& in, Plan& plan)
      : settings_(settings),
        in_(in),
        plan_(plan),
        table_(operand_table(settings.node_label_for_gpu_pod_eviction)),
        snapshot_(take_snapshot(in.node, table_)),
        ledger_(in.pods),
        host_{.nouveau_loaded = in.nouveau_loaded,
              .mellanox_device = in.mellanox_device,
              .mofed_ready = in.mofed_ready} {
    if (auto t = parse_taint(settings.gpu_client_taint)) configured_ = *t;
    if (configured_) effective_ = decide_taint_add(in.node, *configured_).effective;
    // As the run reads them before its pause: the DaemonSets' templates place their pods (label_pause.h).
    if (!label_pause(snapshot_, table_).keys.empty())
      snapshot_.daemonset_templates = daemonset_templates_of(in.pods, in.facts);
    pause_ = std::make_shared<const LabelPause>(label_pause(snapshot_, table_));
  }

  [[nodiscard]] const Snapshot& snapshot() const { return snapshot_; }
  // As the run decides it before its first write: the driver is loaded, the node has no taint with the key
  // and effect, and the first look finds a GPU client to reset.
  [[nodiscard]] bool would_add_taint() const {
    if (!configured_ || !in_.nvidia_loaded) return false;
    if (decide_taint_add(in_.node, *configured_).outcome != TaintOutcome::kAdded) return false;
    PodSnapshot pods;
    for (const auto& p : in_.pods) pods.push_back(std::make_shared<const Json>(p));
    return clients_need_taint(settings_, pods, pause_);
  }
  [[nodiscard]] const std::optional<Taint>& configured_taint() const { return configured_; }
  PodLedger& ledger() { return ledger_; }

  // One step of the run, as its row shows it (a step with nothing to show renders no line).
  void render(Step step) {
    if (const auto r = step_def(step).render) r(*this);
  }
  void finish();

  // StepPlan: what the steps' rows render with.
  void line(std::string text) override { plan_.steps.push_back(std::move(text)); }
  [[nodiscard]] const Settings& settings() const override { return settings_; }
  [[nodiscard]] const FlowSteps& flow() const override { return plan_.flow; }
  [[nodiscard]] const PlannedHost& host() const override { return host_; }
  [[nodiscard]] const std::string& dra_in_use() const override { return plan_.dra_in_use; }
  void label_pre_installed() override;
  void pause_operands() override;
  void take_gpu_users_off() override;
  void report_skip_decision() override { plan_.skip = in_.skip.summary; }
  void await_dra_helpers() override;
  void reset_dra_plugin_clients() override;
  void pause_dra_plugin() override;

 private:
  void add_labels(const Json& patch, const std::string& batch);
  void take_operand_pods(const std::vector<OperandWait>& waits, const std::string& step,
                         const std::string& why);
  PodListDecision take_gpu_clients(GpuClientPhase phase, const std::string& step);
  void take_gpu_workloads();
  void leave_gpu_workloads();
  void plan_taint();
  void plan_cordon();

  const Settings& settings_;
  const PlanInputs& in_;
  Plan& plan_;
  std::vector<OperandSpec> table_;
  Snapshot snapshot_;
  PodLedger ledger_;
  std::optional<Taint> configured_;  // GPU_CLIENT_TAINT, when it parses
  std::optional<Taint> effective_;   // the taint the clients must tolerate once the node is tainted
  PlannedHost host_;
  std::shared_ptr<const LabelPause> pause_;
  std::vector<Json> to_evict_;
  bool needs_taint_ = false;
  bool clients_refused_ = false;
};

void PlanBuilder::add_labels(const Json& patch, const std::string& batch) {
  if (!patch_has_labels(patch)) return;
  for (const auto& [key, value] : patch["metadata"]["labels"].items()) {
    plan_.labels.push_back(
        {key, snapshot_.value(key), value.is_string() ? value.get<std::string>() : "", batch});
  }
}

// The pods an operand wait waits for: taken as "wait" at `step`.
void PlanBuilder::take_operand_pods(const std::vector<OperandWait>& waits, const std::string& step,
                                    const std::string& why) {
  for (const auto& pod : ledger_.remaining()) {
    for (const auto& w : waits) {
      const auto what = wait_reason(pod, w, settings_.operator_namespace);
      if (!what) continue;
      ledger_.decide({kube::ref_string(pod), PodAction::kWait, step, *what + ": " + why, {}, {}});
      break;
    }
  }
}

// One gpu-client phase: decisions of the client pipeline over the pods still on the node at that point.
// Returns the first look (for the taint rule); pods it evicts are added to the pods to evict.
PodListDecision PlanBuilder::take_gpu_clients(GpuClientPhase phase, const std::string& step) {
  const auto pods = ledger_.remaining();
  PodListDecision first = decide_pods(gpu_client_pipeline_for(settings_, phase, effective_, pause_), pods);
  for (size_t i = 0; i < pods.size(); ++i) {
    const PodDecision& d = first.decisions[i];
    switch (d.verdict) {
      case Verdict::kDelete:
        ledger_.decide(
            {d.pod, PodAction::kReset, step,
             d.reason.empty() ? "designated GPU client: evicted while the taint keeps it off" : d.reason,
             d.warnings, d.filter});
        to_evict_.push_back(pods[i]);
        break;
      case Verdict::kWaitOnly:
        ledger_.decide({d.pod, PodAction::kWait, step, d.reason, d.warnings, d.filter});
        break;
      case Verdict::kError:
        ledger_.decide({d.pod, PodAction::kRefused, step, d.reason, d.warnings, d.filter});
        break;
      case Verdict::kSkip:
        if (d.notice != Notice::kQuiet)
          ledger_.note_skip(d.pod, "gpu-client: " + d.reason, PodLedger::Weight::kStrong);
        break;
    }
  }
  if (!first.ok()) {
    plan_.refusals.push_back(
        fmt::format("{}: refusing to reset the GPU client pods (nothing evicted by that "
                    "step; the paused labels are restored): {}",
                    step, fmt::join(first.errors, "; ")));
  }
  return first;
}

// The operand wait, the GPU-client reset and (on the full path) the GPU-workload eviction, side by side.
void PlanBuilder::take_gpu_users_off() {
  const auto waits = pause_waits(snapshot_, table_);
  if (!waits.empty()) {
    line(fmt::format("wait for the operand pods to go (OPERAND_WAIT_TIMEOUT {})",
                     format_duration(settings_.operand_wait_timeout, DurationStyle::kWholeSeconds)));
  }
  take_operand_pods(waits, "operands", "its node label is paused");
  const PodListDecision clients = take_gpu_clients(GpuClientPhase::kWithOperands, "gpu-clients");
  clients_refused_ = !clients.ok();
  needs_taint_ = client_reset_needs_taint(clients);
  if (needs_taint_) {
    line("taint the node and reset the annotated GPU client pods (GPU_CLIENT_EVICTION_TIMEOUT " +
         format_duration(settings_.gpu_client_eviction_timeout, DurationStyle::kWholeSeconds) + ")");
  }
  if (plan_.flow.path != RunPath::kFull) return;
  if (plan_.flow.evict_workloads) {
    take_gpu_workloads();
  } else {
    leave_gpu_workloads();
  }
}

void PlanBuilder::take_gpu_workloads() {
  plan_cordon();
  line("cordon the node and evict the GPU pods (DRAIN_TIMEOUT_SECONDS " +
       (settings_.drain_timeout == Duration::zero()
            ? std::string("0, no limit")
            : format_duration(settings_.drain_timeout, DurationStyle::kWholeSeconds)) +
       ")");
  const auto pods = ledger_.remaining();
  auto planned = decide_gpu_workload_eviction(pods, drain_options(settings_), in_.facts);
  if (!planned) {
    plan_.notes.push_back("GPU pods: " + planned.error().message);
    return;
  }
  for (size_t i = 0; i < planned->pods.decisions.size(); ++i) {
    const PodDecision& d = planned->pods.decisions[i];
    if (d.filter == "dra-helper") continue;  // waited for by its own step
    if (d.verdict == Verdict::kDelete) {
      ledger_.decide({d.pod, PodAction::kEvict, "gpu-workloads", d.reason.empty() ? "GPU pod" : d.reason,
                      d.warnings, d.filter});
      to_evict_.push_back(pods[i]);
    } else if (d.filter != "gpu") {
      ledger_.decide({d.pod, PodAction::kRefused, "gpu-workloads", "GPU pod cannot be evicted: " + d.reason,
                      d.warnings, d.filter});
    } else {
      ledger_.note_skip(d.pod, d.reason, PodLedger::Weight::kWeak);
    }
  }
  if (!planned->pods.ok()) {
    plan_.refusals.push_back(fmt::format("gpu-workloads: Cannot delete all GPU pods ({}){}",
                                         fmt::join(planned->pods.errors, "; "),
                                         plan_.auto_drain ? "; the run falls back to draining the node"
                                                          : "; the run fails and restores the node"));
  }
}

// Nobody evicts them: a GPU pod still running holds the driver and the unload fails.
void PlanBuilder::leave_gpu_workloads() {
  plan_.cordon_reason =
      plan_.upgrade_policy ? "the GPU Operator's upgrade policy owns the cordon" : "GPU pod eviction is off";
  for (const auto& pod : ledger_.remaining()) {
    if (!kube::pod_declares_gpu_resource(pod)) continue;
    ledger_.decide({kube::ref_string(pod),
                    PodAction::kIgnored,
                    "gpu-workloads",
                    plan_.upgrade_policy
                        ? "GPU pod: the GPU Operator's upgrade policy evicts workloads, not driver-manager"
                        : "GPU pod: ENABLE_GPU_POD_EVICTION and ENABLE_AUTO_DRAIN are off",
                    {},
                    {}});
  }
}

// The DRA driver's helpers still on the node: waited for, never evicted; odd shapes are said as notes.
void PlanBuilder::await_dra_helpers() {
  std::optional<std::vector<ClaimHold>> holds;
  if (in_.facts.claim_holds) {
    holds.emplace();
    for (const auto& pod : in_.pods) {
      if (kube::pod_finished(pod) || dra_helper_of(pod) || kube::pod_resource_claims(pod).empty()) continue;
      auto h = in_.facts.claim_holds(pod);
      if (!h) {
        holds.reset();
        break;
      }
      holds->insert(holds->end(), h->begin(), h->end());
    }
  }
  for (auto& odd : dra_helper_oddities(in_.node, in_.pods, holds))
    plan_.notes.push_back("DRA driver helpers: " + odd);
  std::vector<std::string> names;
  for (const auto& pod : ledger_.remaining()) {
    const auto helper = kube::pod_finished(pod) ? std::nullopt : dra_helper_of(pod);
    if (!helper) continue;
    ledger_.decide({helper->pod,
                    PodAction::kWait,
                    "dra-helpers",
                    describe(*helper) + ": " + how_it_leaves(*helper) + "; never evicted",
                    {},
                    "dra-helper"});
    names.push_back(helper->pod);
  }
  if (names.empty()) return;
  line(fmt::format(
      "wait for the DRA driver's helper pods to leave as the DRA kubelet plugin unprepares their "
      "claims (OPERAND_WAIT_TIMEOUT {}; never evicted): {}",
      format_duration(settings_.operand_wait_timeout, DurationStyle::kWholeSeconds), fmt::join(names, ", ")));
}

void PlanBuilder::reset_dra_plugin_clients() {
  const PodListDecision dra_clients = take_gpu_clients(GpuClientPhase::kDraPlugin, "dra-plugin-clients");
  if (!client_reset_needs_taint(dra_clients)) return;
  if (!needs_taint_) line("taint the node");
  needs_taint_ = true;
  line("reset the GPU client pods that are DRA kubelet plugins");
}

void PlanBuilder::pause_dra_plugin() {
  add_labels(plugin_patch(snapshot_, table_), "dra-plugin");
  take_operand_pods(plugin_waits(snapshot_, table_), "dra-plugin", "waited for after its label is paused");
  line("pause the DRA kubelet-plugin label and wait for its pods");
}

void PlanBuilder::plan_taint() {
  plan_.taint = settings_.gpu_client_taint;
  if (!configured_) {
    plan_.taint_action = TaintAction::kNone;
    plan_.taint_reason = "GPU_CLIENT_TAINT does not parse";
    return;
  }
  if (!needs_taint_) {
    plan_.taint_action = TaintAction::kNone;
    plan_.taint_reason = clients_refused_ ? "the GPU client reset is refused before the node is tainted"
                                          : "no GPU client pod to reset";
    return;
  }
  const TaintAddDecision add = decide_taint_add(in_.node, *configured_);
  switch (add.outcome) {
    case TaintOutcome::kAdded:
      plan_.taint_action = TaintAction::kAdd;
      plan_.taint_reason =
          "keeps the reset GPU clients off the node until the driver is unloaded; removed at the end";
      break;
    case TaintOutcome::kAlreadyOurs:
      plan_.taint_action = TaintAction::kAlreadyOurs;
      plan_.taint_reason = "added by an earlier run of driver-manager; removed at the end";
      break;
    case TaintOutcome::kPresentNotOurs:
      plan_.taint_action = TaintAction::kPresentNotOurs;
      plan_.taint_reason = "a taint " + add.effective.to_string() +
                           " is already on the node and not ours: it keeps the clients off and stays";
      break;
  }
}

void PlanBuilder::plan_cordon() {
  if (cordoned_by_us(in_.node)) {
    plan_.cordon = CordonAction::kAlreadyOurs;
    plan_.cordon_reason = "cordoned by an earlier run of driver-manager; uncordoned at the end";
  } else if (kube::node_unschedulable(in_.node)) {
    plan_.cordon = CordonAction::kCordonedByOther;
    plan_.cordon_reason = "already cordoned by someone else: left cordoned";
  } else {
    plan_.cordon = CordonAction::kCordon;
    plan_.cordon_reason = "before evicting GPU pods; uncordoned at the end";
  }
}

void PlanBuilder::label_pre_installed() {
  plan_.labels.push_back({std::string(kDriverLabel), kube::label(in_.node, kDriverLabel).value_or(""),
                          std::string(kPreInstalledValue), "pre-installed"});
  line("label the node " + std::string(kDriverLabel) + "=" + std::string(kPreInstalledValue) +
       " (the driver DaemonSet leaves the node)");
}

// The operand labels paused (restored at the end), with the empty ones an earlier driver manager left.
void PlanBuilder::pause_operands() {
  add_labels(pause_patch(snapshot_, table_), "pause");
  if (plan_.labels.empty()) return;
  line("pause the operand labels (restored at the end)");
  if (const auto empty = empty_operand_labels(snapshot_, table_); !empty.empty())
    line(fmt::format("remove the empty operand labels an earlier driver manager left, with the restore: {}",
                     fmt::join(empty, ", ")));
}

// What a pod no step takes is told, per path.
std::string untaken_pod_reason(RunPath path) {
  switch (path) {
    case RunPath::kPreInstalled:
      return "the pre-installed path touches no pod";
    case RunPath::kRefused:
      return "the run stops before touching any pod";
    case RunPath::kNoDriver:
      return "the no-driver path evicts nothing";
    case RunPath::kSkip:
      return "the skip path keeps GPU workloads and other pods running";
    case RunPath::kFull:
      return "not an operand, GPU client or GPU workload: stays";
  }
  return "";
}

void PlanBuilder::finish() {
  const RunPath path = plan_.flow.path;
  plan_.pods = ledger_.finish(untaken_pod_reason(path));
  plan_node_facts(plan_, in_, needs_taint_ ? effective_ : std::nullopt);
  if (path != RunPath::kSkip && path != RunPath::kFull) return;
  plan_taint();
  plan_.pdbs = in_.pdbs ? pdb_impacts(*in_.pdbs, in_.pdb_version, to_evict_) : std::vector<PdbImpact>{};
  plan_.pdb_note = in_.pdb_error;
}

std::string path_reason(RunPath path, const PlanInputs& in) {
  switch (path) {
    case RunPath::kPreInstalled:
      return "a driver is installed on the host itself (nvidia-smi: " + in.host_driver_version.value_or("") +
             ")";
    case RunPath::kRefused:
      return "the run would stop before changing anything";
    case RunPath::kNoDriver:
      return "no NVIDIA driver loaded: nothing holds it, so nothing is evicted";
    case RunPath::kSkip:
      return "the loaded driver is kept: " + in.skip.summary;
    case RunPath::kFull:
      return "the loaded driver is uninstalled: " + in.skip.summary;
  }
  return "";
}

// What the preflight's refusals depend on besides the inputs.
struct RefusalFacts {
  bool adds_taint = false;  // the run would add the GPU client taint (PlanBuilder::would_add_taint)
};

// What stops the run before any write, as its preflight would say it.
std::vector<std::string> refusals_before_any_write(const Settings& settings, const PlanInputs& in, Plan& plan,
                                                   const RefusalFacts& facts) {
  std::vector<std::string> out;
  if (refuse_for_unloadable_driver(in.can_unload, in.skip)) {
    out.push_back("before any write: " + in.can_unload.error().message);
  }
  const auto taint = parse_taint(settings.gpu_client_taint);
  if (plan.own_pod_tolerates && !*plan.own_pod_tolerates && taint) {
    if (facts.adds_taint) {
      out.push_back("before any write: " + check_tolerates_taint(*in.own_pod, *taint)->message);
    } else {
      plan.own_pod_note +=
          std::string(plan.own_pod_note.empty() ? "" : "; ") + "it does not tolerate the GPU client taint " +
          taint->to_string() +
          ", which is no refusal: the run adds no taint (a GPU client bound before the reset "
          "makes the reset refuse instead)";
    }
  }
  if (!taint) out.push_back("before any write: GPU_CLIENT_TAINT: " + taint.error().message);
  return out;
}

}  // namespace

Plan build_plan(const Settings& settings, const PlanInputs& in) {
  Plan plan;
  plan.node = settings.node_name;
  PlanBuilder builder(settings, in, plan);
  const Snapshot& snapshot = builder.snapshot();
  plan.upgrade_policy = snapshot.policy_enabled();
  plan_host(plan, in);
  plan_own_pod(plan, in, builder.configured_taint());
  if (in.own_pod)
    builder.ledger().decide({in.own_pod->ref, PodAction::kIgnored, "", "this program's own pod", {}, {}});
  plan.taint = settings.gpu_client_taint;
  plan.taint_reason = "this path resets no GPU client";
  plan.cordon_reason = "this path evicts no GPU pod";

  const bool host_driver = in.host_driver_version.has_value();
  if (!host_driver) {
    plan.refusals = refusals_before_any_write(settings, in, plan, {.adds_taint = builder.would_add_taint()});
    plan_leftovers(plan, in, snapshot,
                   in.nvidia_loaded ? LeftoverTaint::kKeepUntilUnload : LeftoverTaint::kRemoveNow);
  }
  const FlowInputs flow_in{.host_driver = host_driver,
                           .refused = !plan.refusals.empty(),
                           .nvidia_loaded = in.nvidia_loaded,
                           .skip = in.skip.skip,
                           .upgrade_policy = plan.upgrade_policy,
                           .dra_label = snapshot.dra_on()};
  const FlowFacts facts = flow_facts(settings, flow_in, [&] {
    DraEvidence dra;
    dra.gpu_slices = in.gpu_slices;
    for (const auto& pod : in.pods) add_pod_dra_evidence(pod, in.facts, dra);
    plan.dra_in_use = dra_in_use_reason(dra);
    return plan.dra_in_use;
  });
  plan.gpu_pod_eviction = facts.gpu_pod_eviction;
  plan.auto_drain = facts.auto_drain;
  plan.flow = decide_steps(facts);
  plan.path_reason = path_reason(plan.flow.path, in);
  for (const auto& s : plan.flow.steps) builder.render(s.step);
  builder.finish();
  return plan;
}

}  // namespace dm::manager
