// The steps that take pods off the node with the run's collaborators alone, and the skip decision's report
// (docs/behaviour.md, Full-drain fallback, DRA claims, DRA driver helpers and Skip-uninstall).
#include <spdlog/spdlog.h>

#include "manager/commands/env_steps.h"
#include "manager/commands/step_def.h"
#include "manager/pods/dra_helpers.h"
#include "manager/pods/drain.h"

namespace dm::manager {

void report_skip_decision(const SkipDecision& skip) {
  if (skip.checked) {
    spdlog::info(
        "Checking if the currently loaded NVIDIA driver version and configuration matches the desired "
        "state...");
  }
  if (skip.warning) {
    spdlog::warn("{}", skip.log_line);
  } else if (!skip.log_line.empty()) {
    spdlog::info("{}", skip.log_line);
  }
  if (!skip.skip) return;
  spdlog::info(
      "The NVIDIA driver is already loaded with the desired version and configuration, skipping the "
      "uninstallation of the driver in an attempt to not disrupt running workloads");
}

Status drain_after_failed_eviction(const StepEnv& env) {
  spdlog::info("Attempting node drain");
  return drain_node(env.run);
}

Status check_dra_claims(const StepEnv& env) {
  return check_dra_claim_holders(env.run);
}

Status reset_dra_plugin_clients(const StepEnv& env) {
  return env.clients.reset_dra_plugin_clients();
}

// The rows of the steps above (step_def.h).

const StepDef& report_skip_decision_step() {
  static constexpr StepDef kDef{.step = Step::kReportSkipDecision,
                                .name = "report-skip-decision",
                                .report = true,
                                .run =
                                    [](StepCall& c) {
                                      report_skip_decision(c.run.skip);
                                      return ok_status();
                                    },
                                .render = [](StepPlan& plan) { plan.report_skip_decision(); }};
  return kDef;
}

// Only where the workloads are evicted with auto drain on, and only after their eviction failed. `plan`
// shows it with the eviction's refusal, when it would fail.
const StepDef& drain_after_failed_eviction_step() {
  static constexpr StepDef kDef{
      .step = Step::kDrainAfterFailedEviction,
      .name = "drain-after-failed-eviction",
      .taken = [](const FlowFacts& f, bool evict_workloads) { return evict_workloads && f.auto_drain; },
      .run = [](StepCall& c) { return drain_after_failed_eviction(c.env); },
      .needed =
          [](const RunContext& run) { return run.workload_eviction == WorkloadEviction::kDrainPending; }};
  return kDef;
}

// Where DRA is on: the helpers leave while the plugin still runs, before the claim guard counts claims.
const StepDef& await_dra_helpers_step() {
  static constexpr StepDef kDef{
      .step = Step::kAwaitDraHelpers,
      .name = "await-dra-helpers",
      .taken = [](const FlowFacts& f, bool /*evict_workloads*/) { return f.dra_on; },
      .run = [](StepCall& c) { return await_dra_helpers(c.env.run); },
      .render = [](StepPlan& plan) { plan.await_dra_helpers(); }};
  return kDef;
}

const StepDef& check_dra_claims_step() {
  static constexpr StepDef kDef{
      .step = Step::kCheckDraClaims,
      .name = "check-dra-claims",
      .taken = [](const FlowFacts& f, bool /*evict_workloads*/) { return f.dra_on; },
      .run = [](StepCall& c) { return check_dra_claims(c.env); },
      .render =
          [](StepPlan& plan) {
            const std::string& why = plan.dra_in_use();
            plan.line("check that no pod still holds a GPU resource claim" +
                      (why.empty() ? "" : " (DRA is in use: " + why + ")"));
          }};
  return kDef;
}

// It opens the phase of what is left before the unload only when there are some.
const StepDef& reset_dra_plugin_clients_step() {
  static constexpr StepDef kDef{
      .step = Step::kResetDraPluginClients,
      .name = "reset-dra-plugin-clients",
      .run = [](StepCall& c) { return reset_dra_plugin_clients(c.env); },
      .opens_phase = [](const StepEnv& env) { return env.clients.dra_plugin_clients_present(); },
      .render = [](StepPlan& plan) { plan.reset_dra_plugin_clients(); }};
  return kDef;
}

}  // namespace dm::manager
