#include "manager/node/taint_ops.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <optional>
#include <utility>

#include "kube/objects.h"
#include "manager/node/node_ops.h"

namespace dm::manager {

using Json = nlohmann::json;
using kube::Taint;

namespace {

const Json& taints_of(const Json& node) {
  static const Json kNull;
  if (!node.is_object() || !node.contains("spec") || !node["spec"].is_object()) return kNull;
  const auto it = node["spec"].find("taints");
  return it == node["spec"].end() ? kNull : *it;
}

// The entry of `taints` with the key and effect of `t` (the API server allows only one).
std::optional<Taint> same_key_effect(const Json& taints, const Taint& t) {
  if (!taints.is_array()) return std::nullopt;
  for (const auto& e : taints) {
    Taint x = kube::taint_from_json(e);
    if (x.key == t.key && x.effect == t.effect) return x;
  }
  return std::nullopt;
}

// A JSON merge patch replaces spec.taints as a whole; the resourceVersion makes it conditional, so the
// list we computed cannot overwrite a change made since our GET (the API server answers 409 instead).
Json taint_patch(const Json& node, const Json& taints, const Json& annotation_value) {
  Json list = taints.is_array() && !taints.empty() ? taints : Json(nullptr);
  return {{"metadata",
           {{"resourceVersion", kube::resource_version(node)},
            {"annotations", {{std::string(kTaintOwnerAnnotation), annotation_value}}}}},
          {"spec", {{"taints", list}}}};
}

}  // namespace

std::optional<std::string> taint_owner_annotation(const Json& node) {
  if (!node.is_object() || !node.contains("metadata")) return std::nullopt;
  const auto& md = node["metadata"];
  if (!md.contains("annotations") || !md["annotations"].is_object()) return std::nullopt;
  const auto it = md["annotations"].find(std::string(kTaintOwnerAnnotation));
  if (it == md["annotations"].end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

TaintAddDecision decide_taint_add(const Json& node, const Taint& taint) {
  TaintAddDecision plan;
  plan.effective = taint;
  const Json& current = taints_of(node);
  const auto owned_text = taint_owner_annotation(node);
  std::optional<Taint> owned;
  if (owned_text) {
    if (auto p = parse_taint(*owned_text)) owned = *p;
  }

  if (owned && *owned == taint && has_exact_taint(current, taint)) {
    plan.outcome = TaintOutcome::kAlreadyOurs;
    return plan;
  }
  // A taint of ours that is not the wanted one (settings changed since a crashed run) goes first.
  Json taints = owned ? without_taint(current, *owned) : current;
  if (auto existing = same_key_effect(taints, taint)) {
    plan.outcome = TaintOutcome::kPresentNotOurs;
    plan.effective = *existing;
    if (owned_text) plan.patch = taint_patch(node, taints, nullptr);  // drop our stale ownership only
    return plan;
  }
  plan.outcome = TaintOutcome::kAdded;
  plan.patch = taint_patch(node, with_taint(taints, taint), taint.to_string());
  return plan;
}

TaintRemoveDecision decide_taint_remove(const Json& node) {
  TaintRemoveDecision plan;
  plan.owned = taint_owner_annotation(node);
  if (!plan.owned) return plan;
  const Json& current = taints_of(node);
  Json taints = current;
  if (auto owned = parse_taint(*plan.owned); owned && has_exact_taint(current, *owned)) {
    plan.removed = *owned;
    taints = without_taint(current, *owned);
  }
  plan.patch = taint_patch(node, taints, nullptr);
  return plan;
}

namespace {

std::string removal_line(const TaintRemoveDecision& plan, const std::string& node_name) {
  if (plan.removed) {
    return fmt::format("Removing taint {} (added by driver-manager) from node {}", plan.removed->to_string(),
                       node_name);
  }
  return fmt::format("Taint \"{}\" recorded in {} is no longer on node {}; removing the annotation",
                     plan.owned.value_or(""), kTaintOwnerAnnotation, node_name);
}

}  // namespace

void fold_taint_remove(const Json& node, const std::string& node_name, FoldedPatch& part,
                       std::function<void()> on_applied) {
  TaintRemoveDecision plan = decide_taint_remove(node);
  if (!plan.owned || !plan.patch) return;
  part.body = std::move(*plan.patch);
  part.body["metadata"].erase("resourceVersion");  // the write sets it
  part.lines.push_back({.text = removal_line(plan, node_name)});
  if (on_applied) part.applied.push_back(std::move(on_applied));
}

TaintOps::TaintOps(kube::Api& client, const Clock& clock, CancelToken cancel, std::string node,
                   int max_attempts)
    : client_(client, std::move(cancel)),
      clock_(clock),
      node_(std::move(node)),
      max_attempts_(max_attempts) {}

// After the first conflict the node is read again at once: it is nearly always one other write (the cordon
// written beside the taint, a heartbeat), not a contest. Only repeated conflicts back off.
void TaintOps::conflict_pause(int attempt) const {
  if (attempt > 1) clock_.sleep_for(std::chrono::milliseconds(50) * (attempt - 1), client_.token());
}

Result<Json> TaintOps::get() {
  auto r = client_.get(kube::paths::node(node_));
  if (!r) return r.error().wrap("failed to get node " + node_);
  if (known_ != nullptr) known_->remember(*r);
  return r;
}

std::optional<Json> TaintOps::copy_to_change(const Taint& taint) const {
  std::optional<Json> copy = known_->copy();
  if (copy && !decide_taint_add(*copy, taint).patch) return std::nullopt;
  return copy;
}

Result<TaintAddDecision> TaintOps::add(const Taint& taint) {
  Error last;
  // The first look may be the known copy (no GET): a stale one meets a conflict like any other change, and
  // a decision to write nothing is taken on a fresh read only.
  bool copy_allowed = known_ != nullptr;
  bool announced = false;  // "Tainting node" was said for a stale copy: not again for the fresh read
  for (int attempt = 1; attempt <= max_attempts_;) {
    std::unique_lock lock(guarded_write_lock());
    std::optional<Json> copy = copy_allowed ? copy_to_change(taint) : std::nullopt;
    copy_allowed = false;
    const bool from_copy = copy.has_value();
    auto node = from_copy ? Result<Json>(std::move(*copy)) : get();
    if (!node) return node.error();
    TaintAddDecision plan = decide_taint_add(*node, taint);
    switch (plan.outcome) {
      case TaintOutcome::kAlreadyOurs:
        spdlog::info("Node {} already carries taint {} added by driver-manager", node_, taint.to_string());
        plan.in_place_at = kube::resource_version(*node);
        return plan;
      case TaintOutcome::kPresentNotOurs:
        spdlog::info(
            "Node {} already has taint {} with the key and effect of {}: not adding a second one, and it "
            "stays "
            "on the node afterwards (driver-manager did not add it)",
            node_, plan.effective.to_string(), taint.to_string());
        break;
      case TaintOutcome::kAdded:
        if (refusal_ && from_copy) continue;  // decided on a fresh read only
        if (refusal_) return *refusal_;
        if (!announced) {
          spdlog::info("Tainting node {} with {} so that evicted GPU client pods are not scheduled back",
                       node_, taint.to_string());
        }
        break;
    }
    announced = false;
    if (!plan.patch) {
      plan.in_place_at = kube::resource_version(*node);
      return plan;
    }
    auto r = client_.patch(kube::paths::node(node_), kube::PatchType::kMerge, *plan.patch);
    if (r) {
      if (known_ != nullptr) known_->remember(*r);
      plan.in_place_at = kube::resource_version(*r);
      return plan;
    }
    last = r.error();
    if (!last.conflict()) return last.wrap("failed to taint node " + node_ + " with " + taint.to_string());
    lock.unlock();
    if (from_copy) {
      spdlog::debug("Node {} changed since it was last seen, reading it before tainting", node_);
      announced = plan.outcome == TaintOutcome::kAdded;
      continue;  // a stale copy is not a contest: no attempt counted, no pause
    }
    spdlog::info("Node {} changed while tainting it, reading it again", node_);
    conflict_pause(attempt);
    ++attempt;
  }
  return last.wrap("failed to taint node " + node_ + " with " + taint.to_string() + " after " +
                   std::to_string(max_attempts_) + " conflicting updates");
}

Result<std::optional<Taint>> TaintOps::remove_ours(const Json* node) {
  Error last;
  std::string owned_text = "<key>:<effect>";
  for (int attempt = 1; attempt <= max_attempts_; ++attempt) {
    Json fresh;
    if (node == nullptr || attempt > 1) {
      auto g = get();
      if (!g) return g.error().wrap("cannot remove the gpu-client taint");
      fresh = std::move(*g);
    }
    const Json& current = (node == nullptr || attempt > 1) ? fresh : *node;
    TaintRemoveDecision plan = decide_taint_remove(current);
    if (!plan.owned) return std::optional<Taint>{};
    owned_text = *plan.owned;
    spdlog::info("{}", removal_line(plan, node_));
    auto r = client_.patch(kube::paths::node(node_), kube::PatchType::kMerge, *plan.patch);
    if (r) return plan.removed;
    last = r.error();
    if (!last.conflict()) break;
    spdlog::info("Node {} changed while removing the taint, reading it again", node_);
    conflict_pause(attempt);
  }
  return last.wrap("failed to remove the gpu-client taint from node " + node_ +
                   " (remove it by hand: kubectl taint node " + node_ + " " + owned_text +
                   "- && kubectl annotate node " + node_ + " " + std::string(kTaintOwnerAnnotation) + "-)");
}

}  // namespace dm::manager
