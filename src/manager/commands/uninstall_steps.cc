// What the run does around its steps with its own state: the DaemonSet templates read before the path is
// decided, the leftovers of an earlier run adopted, and the run's label write (docs/behaviour.md walks
// through each; the steps themselves: env_steps.h, run_steps.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <set>

#include "common/duration_text.h"
#include "kube/objects.h"
#include "manager/commands/cordon_steps.h"
#include "manager/commands/env_steps.h"
#include "manager/commands/step_def.h"
#include "manager/commands/uninstall_flow.h"
#include "manager/pods/drain.h"
#include "manager/pods/holders.h"
#include "manager/pods/waits.h"
#include "manager/rules/pod_rules.h"

namespace dm::manager {

// Which DaemonSet pods the label pause takes off is read from their DaemonSets' templates (label_pause.h):
// read when the pause has a label to take off (false otherwise).
bool Uninstall::read_daemonset_templates() {
  return labels_.read_daemonset_templates(pods_.snapshot(), run_requests_);
}

// Leftovers of an earlier run that crashed (our taint, our cordon): a path that will unload the driver
// adopts them - they stay on until after the unload, so clients kept away by them cannot come back in
// between - and the other paths undo them now.
Status Uninstall::adopt_leftovers(const nlohmann::json& node, LeftoverTaint taint) {
  if (taint == LeftoverTaint::kKeepUntilUnload) {
    gpu_clients_.adopt_leftover_taint(node);
  } else if (auto h = gpu_clients_.heal_leftover_taint(node); !h) {
    return h.error().wrap("failed to remove the GPU client taint left by an earlier run");
  }
  if (!cordoned_by_us(node)) return ok_status();
  if (snapshot_.policy_enabled()) {
    // The upgrade controller owns the cordon while its policy is on: uncordoning would pull the node out
    // from under it. Only our claim on the cordon goes.
    spdlog::info(
        "Node {} carries the {} annotation of an earlier run, but the GPU Operator's upgrade policy is on "
        "and owns the cordon: dropping the annotation, leaving the node's schedulability to the upgrade "
        "controller",
        settings_.node_name, kCordonedAnnotation);
    return node_.drop_cordon_annotation();
  }
  spdlog::info(
      "Node {} was cordoned by an earlier run of driver-manager ({}); it will be uncordoned at the end",
      settings_.node_name, kCordonedAnnotation);
  register_uncordon(undo_, node_, settings_);
  return ok_status();
}

// Pauses `labels` and records, in the same patch, what they were before (see paused_record.h); the
// run's first write when the lease is still to be taken (first_write()).
Status Uninstall::pause_labels(const nlohmann::json& labels, FirstWrite& first) {
  labels_.record_pause(labels);
  if (first.lease_pending) return first_write(labels, first);
  nlohmann::json annotations = {{std::string(kPausedLabelsAnnotation), labels_.record_value()}};
  if (auto state = reporter_.ride_along_state()) annotations[std::string(kStateAnnotation)] = *state;
  auto s = node_.update_labels(labels, annotations);
  if (!s) return s;
  reporter_.progress().add_paused_labels(labels.size());
  reporter_.carried();
  return s;
}

}  // namespace dm::manager
