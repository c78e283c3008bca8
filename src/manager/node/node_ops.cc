#include "manager/node/node_ops.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "kube/objects.h"
#include "kube/retry.h"
#include "manager/rules/quarantine.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

// Errors a retry cannot fix: the request itself or our permissions are wrong, or the node is gone.
bool permanent(const Error& e) {
  return e.http_status == 400 || e.http_status == 403 || e.http_status == 404 || e.http_status == 422;
}

constexpr Duration kEventRetryBudget = std::chrono::seconds(30);

}  // namespace

bool cordoned_by_us(const Json& node) {
  return !kube::annotation(node, kCordonedAnnotation).value_or("").empty();
}

NodeOps::NodeOps(kube::Api& client, const Clock& clock, CancelToken cancel, std::string node,
                 RetryPolicy retry)
    : client_(client, std::move(cancel)), clock_(clock), node_(std::move(node)), retry_(retry) {}

Result<Json> NodeOps::get() {
  auto r = client_.get(kube::paths::node(node_));
  if (!r) return r.error().wrap("failed to get node " + node_);
  remember(*r);
  return r;
}

Result<Json> NodeOps::patch_with_retry(const Json& body, const std::string& what) {
  std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.0, retry_.jitter);
  Duration delay = retry_.initial;
  Error last;
  for (int attempt = 1; attempt <= retry_.attempts; ++attempt) {
    auto r = client_.patch(kube::paths::node(node_), kube::PatchType::kStrategicMerge, body);
    if (r) {
      remember(*r);
      return r;
    }
    last = r.error();
    // Unanswered: the client tried it again until the deadline of what it serves, which has passed.
    if (permanent(last) || last.unanswered || attempt == retry_.attempts) break;
    spdlog::warn("Failed to update {} on node {}, retrying: {}", what, node_, last.message);
    const auto sleep = std::chrono::duration_cast<Duration>(delay * (1.0 + jitter(rng)));
    if (!clock_.sleep_for(sleep, client_.token())) return last.wrap("cancelled while retrying");
    delay = std::chrono::duration_cast<Duration>(delay * retry_.factor);
  }
  return last.wrap("failed to update " + what + " on node " + node_);
}

Status NodeOps::update_labels(const Json& labels, const Json& annotations) {
  if (labels.empty() && annotations.empty()) return ok_status();
  spdlog::debug("Patching labels of node {}: {} (annotations {})", node_, labels.dump(), annotations.dump());
  Json md = Json::object();
  if (!labels.empty()) md["labels"] = labels;
  if (!annotations.empty()) md["annotations"] = annotations;
  auto r = patch_with_retry(Json{{"metadata", md}}, "labels");
  if (!r) return r.error();
  return ok_status();
}

Result<CordonOutcome> NodeOps::cordon() {
  // A conflict means the node changed between our read and our write (maybe an admin cordoned it):
  // read again and decide again. The first look may be the known copy (no GET): a stale one meets the
  // same conflict, and a decision to write nothing is taken on a fresh read only.
  constexpr int kAttempts = 5;
  Error last;
  bool copy_allowed = known_ != nullptr;
  bool announced = false;  // "Cordoning node" once per decision read from the API server
  for (int attempt = 0; attempt < kAttempts;) {
    const std::lock_guard lock(guarded_write_lock());
    std::optional<Json> copy = copy_allowed ? known_->copy() : std::nullopt;
    copy_allowed = false;
    if (copy && kube::node_unschedulable(*copy)) copy.reset();
    const bool from_copy = copy.has_value();
    Result<Json> node = from_copy ? Result<Json>(std::move(*copy)) : get();
    if (!node) return node.error();
    if (kube::node_unschedulable(*node)) {
      if (cordoned_by_us(*node)) {
        spdlog::info(
            "Node {} is already cordoned by an earlier run of driver-manager ({}); it will be uncordoned",
            node_, kCordonedAnnotation);
        return CordonOutcome::kAlreadyOurs;
      }
      spdlog::info("Node {} is already cordoned by someone else; it will stay cordoned afterwards", node_);
      return CordonOutcome::kAlreadyCordonedByOther;
    }
    if (!announced) spdlog::info("Cordoning node {}", node_);
    announced = false;
    const std::string rv = kube::resource_version(*node);
    Json body = {{"metadata", {{"resourceVersion", rv}, {"annotations", {{kCordonedAnnotation, "true"}}}}},
                 {"spec", {{"unschedulable", true}}}};
    auto r = client_.patch(kube::paths::node(node_), kube::PatchType::kStrategicMerge, body);
    if (r) {
      remember(*r);
      return CordonOutcome::kCordoned;
    }
    last = r.error();
    if (!last.conflict()) return last.wrap("failed to cordon node " + node_);
    if (from_copy) {
      spdlog::debug("Node {} changed since it was last seen, reading it before cordoning", node_);
      announced = true;  // a stale copy is not a contest: no attempt counted
      continue;
    }
    spdlog::info("Node {} changed while cordoning it, reading it again", node_);
    ++attempt;
  }
  return last.wrap("failed to cordon node " + node_);
}

namespace {

// What uncordoning `node` takes: the merge-patch body (empty: nothing) and the line that says it; when
// another controller's mark keeps the cordon, what is kept and the Event that records it.
struct UncordonDecision {
  Json body = Json::object();
  std::string line;
  std::optional<std::string> kept;  // "the cordon, under <claim>"
  std::optional<FoldedPatch::Event> event;
};

constexpr const char* kCordonKeptReason = "CordonKept";

UncordonDecision decide_uncordon(const Json& node, NodeOps::Whose whose, const std::string& name) {
  UncordonDecision plan;
  const bool ours = cordoned_by_us(node);
  const bool cordoned = kube::node_unschedulable(node);
  if (!ours && !(whose == NodeOps::Whose::kAnyone && cordoned)) {
    if (cordoned) plan.line = "Node " + name + " was not cordoned by driver-manager; leaving it cordoned";
    return plan;
  }
  if (const auto mark = cordoned ? quarantine_mark(node) : std::nullopt) {
    const std::string claim = mark->describe();
    plan.kept = "the cordon, under " + claim;
    plan.line = "Leaving node " + name + " cordoned: it is under " + claim +
                ", and uncordoning it would cancel that; the cordon is left to its owner";
    plan.event =
        FoldedPatch::Event{.reason = kCordonKeptReason,
                           .message = "driver-manager left node " + name + " cordoned: it is under " + claim +
                                      ", and uncordoning it would cancel that",
                           .type = "Warning"};
    return plan;
  }
  if (ours) plan.body["metadata"] = {{"annotations", {{kCordonedAnnotation, nullptr}}}};
  if (cordoned) {
    plan.line = "Uncordoning node " + name;
    plan.body["spec"] = {{"unschedulable", nullptr}};
  } else {
    plan.line = "Node " + name + " is already schedulable; removing the " + std::string(kCordonedAnnotation) +
                " annotation";
  }
  return plan;
}

// `part` into `body`: objects key by key, anything else replaced.
void merge_into(Json& body, const Json& part) {
  for (const auto& [key, value] : part.items()) {
    if (value.is_object() && body.contains(key) && body[key].is_object()) {
      merge_into(body[key], value);
    } else {
      body[key] = value;
    }
  }
}

}  // namespace

Status NodeOps::uncordon(Whose whose, const OnKept& kept) {
  auto node = get();
  if (!node) return node.error();
  const UncordonDecision plan = decide_uncordon(*node, whose, node_);
  if (plan.kept) {
    spdlog::warn("{}", plan.line);
    event(plan.event->reason, plan.event->message, plan.event->type);
    if (kept) kept(*plan.kept);
    return ok_status();
  }
  if (!plan.line.empty()) spdlog::info("{}", plan.line);
  if (plan.body.empty()) return ok_status();
  auto r = patch_with_retry(plan.body, "cordon state");
  if (!r) return r.error().wrap("failed to uncordon node " + node_);
  return ok_status();
}

NodeFold NodeOps::uncordon_fold(Whose whose, OnKept kept) const {
  return [whose, name = node_, kept = std::move(kept)](const Json& node, FoldedPatch& patch) {
    UncordonDecision plan = decide_uncordon(node, whose, name);
    merge_into(patch.body, plan.body);
    if (plan.kept) {
      patch.lines.push_back({.level = FoldedPatch::Level::kWarn, .text = plan.line});
      patch.events.push_back(*plan.event);
      if (kept) patch.applied.emplace_back([kept, what = *plan.kept] { kept(what); });
      return;
    }
    if (!plan.line.empty()) patch.lines.push_back({.text = plan.line});
  };
}

namespace {

// Every part of `folds` decided from `node`, in one patch.
FoldedPatch fold_all(const std::vector<NodeFold>& folds, const Json& node) {
  FoldedPatch all;
  for (const auto& fold : folds) {
    FoldedPatch part;
    fold(node, part);
    merge_into(all.body, part.body);
    if (part.refusal && !all.refusal) all.refusal = std::move(part.refusal);
    for (auto& line : part.lines) all.lines.push_back(std::move(line));
    for (auto& a : part.applied) all.applied.push_back(std::move(a));
    for (auto& e : part.events) all.events.push_back(std::move(e));
  }
  return all;
}

// The lines not logged yet for this write.
void say(const std::vector<FoldedPatch::Line>& lines, std::set<std::string>& said) {
  for (const auto& line : lines) {
    if (!said.insert(line.text).second) continue;
    if (line.level == FoldedPatch::Level::kWarn) {
      spdlog::warn("{}", line.text);
    } else {
      spdlog::info("{}", line.text);
    }
  }
}

}  // namespace

Status NodeOps::write_folded(const std::vector<NodeFold>& folds, const std::string& what, const Json* first,
                             bool* maybe_applied) {
  constexpr int kConflicts = 5;
  std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> jitter(0.0, retry_.jitter);
  Duration delay = retry_.initial;
  int conflicts = 0;
  int failures = 0;
  std::set<std::string> said;
  for (;;) {
    const bool from_copy = first != nullptr;
    auto node = from_copy ? Result<Json>(*first) : get();
    first = nullptr;
    if (!node) return node.error().wrap("failed to update " + what + " on node " + node_);
    FoldedPatch all = fold_all(folds, *node);
    if (all.refusal && from_copy) continue;  // decided on a fresh read only
    if (all.refusal) return *all.refusal;
    say(all.lines, said);
    if (!all.body.empty()) {
      all.body["metadata"]["resourceVersion"] = kube::resource_version(*node);
      spdlog::debug("Patching node {} ({}): {}", node_, what, all.body.dump());
      auto r = client_.patch(kube::paths::node(node_), kube::PatchType::kMerge, all.body);
      if (!r) {
        const Error& e = r.error();
        if (maybe_applied != nullptr && (e.http_status == 0 || e.http_status >= 500)) *maybe_applied = true;
        if (e.conflict() && (from_copy || ++conflicts < kConflicts)) continue;
        if (e.conflict())
          return e.wrap("failed to update " + what + " on node " + node_ + ": it kept changing");
        // Upstream's backoff, as for the label patches; the write is decided again from a fresh read.
        if (permanent(e) || e.unanswered || ++failures >= retry_.attempts)
          return e.wrap("failed to update " + what + " on node " + node_);
        spdlog::warn("Failed to update {} on node {}, retrying: {}", what, node_, e.message);
        const auto sleep = std::chrono::duration_cast<Duration>(delay * (1.0 + jitter(rng)));
        if (!clock_.sleep_for(sleep, client_.token())) return e.wrap("cancelled while retrying");
        delay = std::chrono::duration_cast<Duration>(delay * retry_.factor);
        continue;
      }
      remember(*r);
    }
    for (const auto& a : all.applied) a();
    for (const auto& e : all.events) event(e.reason, e.message, e.type);
    return ok_status();
  }
}

Status NodeOps::drop_cordon_annotation() {
  auto r = patch_with_retry(Json{{"metadata", {{"annotations", {{kCordonedAnnotation, nullptr}}}}}},
                            "annotation " + std::string(kCordonedAnnotation));
  if (!r) return r.error();
  return ok_status();
}

void NodeOps::event(const std::string& reason, const std::string& message, const std::string& type) {
  // The node name as UID, as the kubelet does: `kubectl describe node` looks for Events by that UID.
  Json involved = {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_}, {"uid", node_}};
  if (events_forbidden_) return;
  // A record for people: an outage does not hold up the run (or its end) for longer than this.
  const kube::RequestDeadline scope(Deadline::after(clock_, kEventRetryBudget));
  auto s = client_.create_event(involved, reason, message, type);
  if (!s && s.error().forbidden()) {
    // The GPU Operator's stock role for the driver has no `events create`: say so once, then stop trying.
    if (events_forbidden_.exchange(true)) return;
    spdlog::info(
        "Not recording Kubernetes Events on node {}: the service account may not create them; to have them, "
        "add this rule to its (Cluster)Role: {{apiGroups: [\"\"], resources: [events], verbs: [create]}}",
        node_);
    return;
  }
  if (!s) spdlog::debug("Could not record event {} on node {}: {}", reason, node_, s.error().message);
}

}  // namespace dm::manager
