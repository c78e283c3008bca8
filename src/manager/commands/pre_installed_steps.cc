// The pre-installed path's steps: a driver installed on the host itself makes the containerized driver
// unnecessary (docs/behaviour.md, The paths).
#include <spdlog/spdlog.h>

#include <string>

#include "common/duration_text.h"
#include "manager/commands/env_steps.h"
#include "manager/commands/step_def.h"
#include "manager/rules/node_keys.h"

namespace dm::manager {

Status label_pre_installed(const StepEnv& env) {
  spdlog::info("NVIDIA GPU driver is already pre-installed on the node, disabling the containerized driver");
  spdlog::info("Labeling node {} with {}={}", env.run.settings.node_name, kDriverLabel, kPreInstalledValue);
  return env.run.node.update_labels({{std::string(kDriverLabel), std::string(kPreInstalledValue)}});
}

// Gives the DaemonSet controller time to delete this pod, whose nodeSelector no longer matches.
Status await_removal(const StepEnv& env) {
  if (!env.run.clock.sleep_for(env.run.settings.pre_installed_sleep, env.run.cancel))
    return Error("Received SIGTERM while waiting to be removed from the node");
  return ok_status();
}

const StepDef& label_pre_installed_step() {
  static constexpr StepDef kDef{.step = Step::kLabelPreInstalled,
                                .name = "label-pre-installed",
                                .run = [](StepCall& c) { return label_pre_installed(c.env); },
                                .render = [](StepPlan& plan) { plan.label_pre_installed(); }};
  return kDef;
}

const StepDef& await_removal_step() {
  static constexpr StepDef kDef{
      .step = Step::kAwaitRemoval,
      .name = "await-removal",
      .run = [](StepCall& c) { return await_removal(c.env); },
      .render =
          [](StepPlan& plan) {
            plan.line("wait " +
                      format_duration(plan.settings().pre_installed_sleep, DurationStyle::kWholeSeconds) +
                      " to be removed, then exit 1 (driver is pre-installed on host)");
          }};
  return kDef;
}

}  // namespace dm::manager
