// What a step's lines in `plan` are made from (docs/ARCHITECTURE.md, The step table): the `plan` sub-command
// implements it (manager/plan/build.cc) and each step's row says, through it, what the step would do
// (StepDef::render). A step that takes pods or labels asks the plan to account for them, so that `plan` names
// every pod as the run would take it; the others make their lines from the facts alone.
#pragma once

#include <optional>
#include <string>

#include "manager/commands/flow_steps.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// The host as `plan` read or inferred it, as far as the host steps' lines need it.
struct PlannedHost {
  bool nouveau_loaded = false;
  std::optional<std::string> mellanox_device;  // only looked for with GPU_DIRECT_RDMA_ENABLED
  bool mofed_ready = false;
};

class StepPlan {
 public:
  StepPlan() = default;
  StepPlan(const StepPlan&) = delete;
  StepPlan& operator=(const StepPlan&) = delete;
  StepPlan(StepPlan&&) = delete;
  StepPlan& operator=(StepPlan&&) = delete;
  virtual ~StepPlan() = default;

  virtual void line(std::string text) = 0;  // one line of the plan's step list
  [[nodiscard]] virtual const Settings& settings() const = 0;
  [[nodiscard]] virtual const FlowSteps& flow() const = 0;  // the path and its steps, as the run decides them
  [[nodiscard]] virtual const PlannedHost& host() const = 0;
  [[nodiscard]] virtual const std::string& dra_in_use() const = 0;  // why DRA is in use ("" = it is not)

  // The steps that take labels or pods, each decided by the pipelines the run's step calls and entered in
  // the plan's ledger (and its lines).
  virtual void label_pre_installed() = 0;
  virtual void pause_operands() = 0;
  virtual void take_gpu_users_off() = 0;
  virtual void report_skip_decision() = 0;
  virtual void await_dra_helpers() = 0;  // the DRA driver's helpers and how each leaves, odd shapes
  virtual void reset_dra_plugin_clients() = 0;
  virtual void pause_dra_plugin() = 0;
};

}  // namespace dm::manager
