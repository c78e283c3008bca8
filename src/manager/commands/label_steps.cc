// The steps that pause and restore operand labels (docs/behaviour.md, Pausing and restoring operand labels;
// DRA claims).
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "manager/commands/cordon_steps.h"
#include "manager/commands/run_steps.h"
#include "manager/commands/step_def.h"
#include "manager/pods/waits.h"
#include "manager/rules/label_pause.h"

namespace dm::manager {

Status pause_operands(const StepEnv& env, RunServices& services, RunContext& run) {
  spdlog::info(
      "Shutting down all GPU clients on the current node by disabling their component-specific "
      "nodeSelector labels");
  const Settings& settings = env.run.settings;
  const Snapshot& snapshot = services.labels.snapshot();
  const auto& custom = settings.node_label_for_gpu_pod_eviction;
  if (!custom.empty() && !snapshot.value(custom).empty()) {
    spdlog::info("Shutting down GPU clients using node selector label \"{}\"={}", custom,
                 snapshot.value(custom));
  }
  if (services.labels.read_daemonset_templates(env.run.pods.snapshot(), env.run.client)) {
    env.clients.use_label_pause(
        std::make_shared<const LabelPause>(label_pause(snapshot, services.labels.operands())));
  }
  const auto body = pause_patch(snapshot, services.labels.operands());
  if (!patch_has_labels(body)) return ok_status();
  register_legacy_uncordon(services.undo, env.run.node, settings, snapshot.policy_enabled());
  services.labels.register_restore(services.undo);  // before the write: it may be applied unanswered
  if (auto s = services.pause_labels(body["metadata"]["labels"], run.first_write); !s) {
    spdlog::error("Failed to evict GPU operator components, attempting cleanup");
    return s.error();
  }
  return ok_status();
}

Status pause_dra_plugin(const StepEnv& env, RunServices& services, RunContext& run) {
  spdlog::info("Draining the DRA kubelet-plugin (last, after its claim-holding clients)");
  const auto body = plugin_patch(services.labels.snapshot(), services.labels.operands());
  if (patch_has_labels(body)) {
    services.labels.register_restore(services.undo);
    if (auto s = services.pause_labels(body["metadata"]["labels"], run.first_write); !s) return s.error();
  }
  return wait_for_operands(env.run.pods, plugin_waits(services.labels.snapshot(), services.labels.operands()),
                           env.run.settings.operator_namespace, operand_wait_deadline(env.run),
                           env.run.cancel);
}

Status restore_labels(const StepEnv& env, RunServices& services) {
  return services.labels.restore(env.run.node);
}

// The rows of the steps above (step_def.h).

const StepDef& pause_operands_step() {
  static constexpr StepDef kDef{.step = Step::kPauseOperands,
                                .name = "pause-operands",
                                .run = [](StepCall& c) { return pause_operands(c.env, c.services, c.run); },
                                .carries_first_write = true,
                                .render = [](StepPlan& plan) { plan.pause_operands(); }};
  return kDef;
}

const StepDef& pause_dra_plugin_step() {
  static constexpr StepDef kDef{
      .step = Step::kPauseDraPlugin,
      .name = "pause-dra-plugin",
      .taken = [](const FlowFacts& f, bool /*evict_workloads*/) { return f.dra_on; },
      .run = [](StepCall& c) { return pause_dra_plugin(c.env, c.services, c.run); },
      .render = [](StepPlan& plan) { plan.pause_dra_plugin(); }};
  return kDef;
}

// The no-driver path's: labels left paused by a crashed run (the legacy uncordon registered first).
const StepDef& restore_labels_step() {
  static constexpr StepDef kDef{
      .step = Step::kRestoreLabels,
      .name = "restore-labels",
      .run = [](StepCall& c) { return restore_labels(c.env, c.services); },
      .before_check =
          [](StepCall& c) {
            register_legacy_uncordon(c.services.undo, c.env.run.node, c.env.run.settings,
                                     c.services.labels.snapshot().policy_enabled());
          },
      .render =
          [](StepPlan& plan) { plan.line("restore labels left paused by an earlier run, undo its cordon"); }};
  return kDef;
}

}  // namespace dm::manager
