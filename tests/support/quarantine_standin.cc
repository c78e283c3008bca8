#include "support/quarantine_standin.h"

#include <chrono>
#include <set>
#include <utility>

#include "kube/objects.h"

namespace dm::test {

using Json = nlohmann::json;

namespace {

// The upgrade controller's states from cordon-required to uncordon-required (k8s-operator-libs,
// pkg/upgrade/consts.go): DCGM is down somewhere in them, and back once the new driver is validated.
const std::set<std::string>& upgrade_in_progress() {
  static const std::set<std::string> states = {
      "cordon-required",      "wait-for-jobs-required",    "pod-deletion-required",
      "drain-required",       "node-maintenance-required", "post-maintenance-required",
      "pod-restart-required", "validation-required",       "uncordon-required"};
  return states;
}

bool serving(const Json& pod) {
  return !kube::terminating(pod) && kube::pod_phase(pod) == "Running";
}

}  // namespace

bool recipe_excludes(const Json& node) {
  if (kube::label(node, kNvsOptOutLabel).value_or("") == "false") return true;
  const auto state = kube::label(node, kUpgradeStateLabel);
  return state && upgrade_in_progress().count(*state) > 0;
}

QuarantineStandIn::QuarantineStandIn(kube::Api& api, Options options)
    : api_(api), o_(std::move(options)), thread_([this] { loop(); }) {}

QuarantineStandIn::~QuarantineStandIn() {
  stop_ = true;
  thread_.join();
}

std::string QuarantineStandIn::error() const {
  std::lock_guard lk(mu_);
  return error_;
}

void QuarantineStandIn::loop() {
  while (!stop_) {
    if (decide()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
}

bool QuarantineStandIn::decide() {
  auto fail = [this](const std::string& what, const Error& e) {
    std::lock_guard lk(mu_);
    error_ = what + ": " + e.message;
    return true;
  };
  kube::ListOptions dcgm;
  dcgm.label_selector = "app=" + o_.dcgm_app;
  dcgm.field_selector = "spec.nodeName=" + o_.node;
  auto pods = api_.list_all(kube::paths::pods(o_.ns), dcgm);
  if (!pods) return false;  // asked again in a moment
  bool up = false;
  for (const auto& p : *pods) up = up || serving(p);
  if (up) seen_up_ = true;
  if (up || !seen_up_) return false;
  down_ = true;

  auto node = api_.get(kube::paths::node(o_.node));
  if (!node) return fail("reading the node", node.error());
  if (recipe_excludes(*node)) {
    excluded_ = true;
  } else {
    const Json event = {{"nodeName", o_.node},
                        {"agent", "gpu-health-monitor"},
                        {"componentClass", "GPU"},
                        {"checkName", "GpuDcgmConnectivityFailure"},
                        {"isFatal", true},
                        {"isHealthy", false},
                        {"message", "DCGM cannot be reached"}};
    const Json patch = {{"spec", {{"unschedulable", true}}},
                        {"metadata",
                         {{"annotations", {{kNvsQuarantineAnnotation, event.dump()}}},
                          {"labels", {{kNvsStateLabel, "quarantined"}}}}}};
    if (auto r = api_.patch(kube::paths::node(o_.node), kube::PatchType::kMerge, patch); !r)
      return fail("quarantining the node", r.error());
    quarantined_ = true;
  }
  // The kubelet's part: the stuck DCGM pod goes now that the decision is taken.
  for (const auto& p : *pods) {
    if (!kube::terminating(p)) continue;
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    auto r = api_.remove(kube::paths::pod(o_.ns, kube::name(p)), now);
    if (!r && !r.error().not_found()) return fail("finishing the DCGM pod's termination", r.error());
  }
  return true;
}

}  // namespace dm::test
