#include "manager/rules/operands.h"

#include <algorithm>

#include "kube/objects.h"
#include "manager/rules/labels.h"

namespace dm::manager {

using Json = nlohmann::json;
namespace {

OperandSpec row(std::string_view suffix, Batch batch, Inclusion in_batch, std::string_view app,
                Inclusion wait, int wait_order, std::string_view log_name = {}) {
  OperandSpec s;
  s.label_key = std::string(kDeployLabelPrefix) + std::string(suffix);
  s.batch = batch;
  s.in_batch = in_batch;
  s.wait_kind = app.empty() ? WaitKind::kNone : WaitKind::kAppLabel;
  s.app = std::string(app);
  s.log_name = log_name.empty() ? std::string(app) : std::string(log_name);
  s.wait = app.empty() ? Inclusion::kNever : wait;
  s.wait_order = wait_order;
  return s;
}

bool included(Inclusion inc, const std::string& snapshot_value) {
  switch (inc) {
    case Inclusion::kAlways:
      return true;
    case Inclusion::kIfSnapshotSet:
      return !snapshot_value.empty();
    case Inclusion::kNever:
      return false;
  }
  return false;
}

Json labels_patch(const Json& labels) {
  return Json{{"metadata", Json{{"labels", labels}}}};
}

Json batch_patch(const Snapshot& snapshot, const std::vector<OperandSpec>& table, Batch batch) {
  Json labels = Json::object();
  for (const auto& op : table) {
    if (op.batch != batch) continue;
    const std::string v = snapshot.value(op.label_key);
    // Upstream's membership rule first, then ours: never stamp a label that was empty/absent.
    if (!included(op.in_batch, v) || !should_write_label(v)) continue;
    labels[op.label_key] = pause_value(v);
  }
  return labels_patch(labels);
}

std::vector<OperandWait> waits_for(const Snapshot& snapshot, const std::vector<OperandSpec>& table,
                                   Batch batch) {
  std::vector<const OperandSpec*> rows;
  for (const auto& op : table) {
    if (op.batch != batch || op.wait_kind == WaitKind::kNone) continue;
    if (!included(op.wait, snapshot.value(op.label_key))) continue;
    rows.push_back(&op);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const OperandSpec* a, const OperandSpec* b) { return a->wait_order < b->wait_order; });
  std::vector<OperandWait> out;
  std::shared_ptr<const LabelPause> pause;
  for (const auto* op : rows) {
    OperandWait w;
    w.kind = op->wait_kind;
    if (op->wait_kind == WaitKind::kAppLabel) {
      w.app = op->app;
      w.log_name = op->log_name;
    } else {
      w.node_selector_key = op->label_key;
      if (!pause) pause = std::make_shared<const LabelPause>(label_pause(snapshot, table));
      w.pause = pause;
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

std::vector<OperandSpec> operand_table(std::string_view custom_label_key) {
  using I = Inclusion;
  const Batch P = Batch::kPause;
  // Snapshot order = upstream's GET order; wait_order = upstream's sequential wait order
  // (docs/behaviour.md, Operand waits).
  std::vector<OperandSpec> t = {
      row("operator-validator", P, I::kAlways, "nvidia-operator-validator", I::kAlways, 1),
      row("container-toolkit", P, I::kAlways, "nvidia-container-toolkit-daemonset", I::kAlways, 2),
      row("device-plugin", P, I::kAlways, "nvidia-device-plugin-daemonset", I::kAlways, 3),
      row("gpu-feature-discovery", P, I::kAlways, "gpu-feature-discovery", I::kAlways, 4),
      row("dcgm-exporter", P, I::kAlways, "nvidia-dcgm-exporter", I::kAlways, 5),
      row("dcgm", P, I::kAlways, "nvidia-dcgm", I::kAlways, 6),
      // The operator owns the existence of the mig-manager label, so it is only touched when present.
      row("mig-manager", P, I::kIfSnapshotSet, "nvidia-mig-manager", I::kIfSnapshotSet, 9, "mig-manager"),
      row("nvsm", P, I::kAlways, "", I::kNever, 0),
      row("sandbox-validator", P, I::kAlways, "nvidia-sandbox-validator", I::kIfSnapshotSet, 10,
          "sandbox-validator"),
      row("sandbox-device-plugin", P, I::kAlways, "nvidia-sandbox-device-plugin-daemonset", I::kIfSnapshotSet,
          11, "sandbox-device-plugin"),
      row("vgpu-device-manager", P, I::kAlways, "nvidia-vgpu-device-manager", I::kIfSnapshotSet, 12,
          "vgpu-device-manager"),
      row("client", P, I::kIfSnapshotSet, "", I::kNever, 0),
      // The DRA kubelet plugin serves its clients' unprepare calls: paused last, in its own batch.
      row("dra-driver", Batch::kPlugin, I::kIfSnapshotSet, kDraPluginApp, I::kIfSnapshotSet, 1, "dra-driver"),
      row("dra-validator", P, I::kAlways, "", I::kNever, 0),
      row("dcgm-dra", P, I::kAlways, "nvidia-dcgm-dra", I::kAlways, 8),
      row("dcgm-exporter-dra", P, I::kAlways, "nvidia-dcgm-exporter-dra", I::kAlways, 7),
  };
  // Third-party DaemonSets select on the client key (upstream's contract for them): their pods are waited for
  // like operands.
  for (auto& op : t) {
    if (op.label_key == kClientLabel) {
      op.wait_kind = WaitKind::kDaemonSetNodeSelectorKey;
      op.wait = I::kIfSnapshotSet;
      op.wait_order = 13;
    }
  }
  if (!custom_label_key.empty()) {
    OperandSpec c;
    c.label_key = std::string(custom_label_key);
    c.batch = P;
    c.in_batch = I::kIfSnapshotSet;
    // Upstream never waited for these pods: they could still hold the GPU at the unload.
    c.wait_kind = WaitKind::kDaemonSetNodeSelectorKey;
    c.wait = I::kIfSnapshotSet;
    c.wait_order = 14;
    t.push_back(std::move(c));
  }
  return t;
}

std::string Snapshot::value(std::string_view key) const {
  auto it = labels.find(std::string(key));
  return it == labels.end() ? std::string() : it->second;
}

Snapshot take_snapshot(const Json& node, const std::vector<OperandSpec>& table) {
  Snapshot s;
  const Json* labels = nullptr;
  const Json* annotations = nullptr;
  if (node.contains("metadata")) {
    const Json& md = node["metadata"];
    if (md.contains("labels") && md["labels"].is_object()) labels = &md["labels"];
    if (md.contains("annotations") && md["annotations"].is_object()) annotations = &md["annotations"];
  }
  for (const auto& op : table) {
    std::string v;
    if (labels != nullptr && labels->contains(op.label_key) && (*labels)[op.label_key].is_string()) {
      v = (*labels)[op.label_key].get<std::string>();
    }
    s.labels[op.label_key] = v;
  }
  s.node_name = kube::name(node);
  s.node_labels = kube::labels(node);
  const std::string ann(kUpgradeEnabledAnnotation);
  if (annotations != nullptr && annotations->contains(ann) && (*annotations)[ann].is_string()) {
    s.upgrade_annotation = (*annotations)[ann].get<std::string>();
  }
  return s;
}

Json pause_patch(const Snapshot& snapshot, const std::vector<OperandSpec>& table) {
  return batch_patch(snapshot, table, Batch::kPause);
}

Json plugin_patch(const Snapshot& snapshot, const std::vector<OperandSpec>& table) {
  return batch_patch(snapshot, table, Batch::kPlugin);
}

Json restore_patch(const Snapshot& snapshot, const std::vector<OperandSpec>& table) {
  Json labels = Json::object();
  for (const auto& op : table) {
    const std::string v = snapshot.value(op.label_key);
    // Upstream restores the plugin row always; with our write policy both batches reduce to "was it set".
    const Inclusion inc = op.batch == Batch::kPlugin ? Inclusion::kAlways : op.in_batch;
    if (!included(inc, v) || !should_write_label(v)) continue;
    labels[op.label_key] = restore_value(v);
  }
  return labels_patch(labels);
}

std::vector<std::string> empty_operand_labels(const Snapshot& snapshot,
                                              const std::vector<OperandSpec>& table) {
  std::vector<std::string> out;
  for (const auto& op : table) {
    if (!op.label_key.starts_with(kDeployLabelPrefix)) continue;
    const auto it = snapshot.node_labels.find(op.label_key);
    if (it != snapshot.node_labels.end() && it->second.empty()) out.push_back(op.label_key);
  }
  return out;
}

RestoreDecision restore_patch_if_unchanged(const Snapshot& snapshot, const std::vector<OperandSpec>& table,
                                           const Json& current_node) {
  const Json full = restore_patch(snapshot, table);
  const Json* labels = nullptr;
  if (current_node.contains("metadata") && current_node["metadata"].contains("labels")) {
    labels = &current_node["metadata"]["labels"];
  }
  RestoreDecision decision;
  Json keep = Json::object();
  // Upstream's empty leftovers go, unless someone gave the label a value meanwhile.
  for (const auto& key : empty_operand_labels(snapshot, table)) {
    if (labels == nullptr || !labels->contains(key) || (*labels)[key] != "") continue;
    keep[key] = nullptr;
    decision.removed_empty.push_back(key);
  }
  if (patch_has_labels(full)) {
    for (const auto& [key, target] : full["metadata"]["labels"].items()) {
      std::string current;
      if (labels != nullptr && labels->contains(key) && (*labels)[key].is_string()) {
        current = (*labels)[key].get<std::string>();
      }
      if (current == target.get<std::string>()) continue;  // nothing to put back
      if (current != pause_value(snapshot.value(key))) {
        decision.changed_by_others.emplace_back(key, current);
        continue;
      }
      keep[key] = target;
    }
  }
  decision.patch = labels_patch(keep);
  return decision;
}

bool patch_has_labels(const Json& patch) {
  if (!patch.is_object() || !patch.contains("metadata")) return false;
  const Json& md = patch["metadata"];
  return md.contains("labels") && md["labels"].is_object() && !md["labels"].empty();
}

LabelPause label_pause(const Snapshot& snapshot, const std::vector<OperandSpec>& table) {
  LabelPause p;
  p.before = {snapshot.node_name, snapshot.node_labels};
  p.daemonset_templates = snapshot.daemonset_templates;
  // A label a crashed run left paused counts at the value the operator gave it.
  for (const auto& op : table) {
    const std::string v = snapshot.value(op.label_key);
    if (should_write_label(v)) p.before.labels[op.label_key] = restore_value(v);
    if (op.wait_kind == WaitKind::kDaemonSetNodeSelectorKey && included(op.wait, v))
      p.keys.push_back(op.label_key);
  }
  p.after = p.before;
  const Json paused = pause_patch(snapshot, table);
  if (patch_has_labels(paused)) {
    for (const auto& [k, v] : paused["metadata"]["labels"].items()) p.after.labels[k] = v.get<std::string>();
  }
  return p;
}

std::string OperandWait::label_selector() const {
  return kind == WaitKind::kAppLabel ? "app=" + app : std::string();
}

std::string OperandWait::description() const {
  if (kind == WaitKind::kAppLabel) return log_name.empty() ? app : log_name;
  return "daemon set pods with nodeSelector key " + node_selector_key;
}

std::string OperandWait::start_line() const {
  if (kind == WaitKind::kAppLabel) return "Waiting for " + description() + " to shutdown";
  return "Waiting for any daemon set pods with nodeSelector key " + node_selector_key + " to terminate";
}

std::string OperandWait::failure_line(std::string_view error) const {
  if (kind == WaitKind::kAppLabel)
    return "Failed to wait for " + description() + " to shutdown: " + std::string(error);
  return "Failed to wait for GPU client pods to terminate: " + std::string(error);
}

std::vector<OperandWait> pause_waits(const Snapshot& snapshot, const std::vector<OperandSpec>& table) {
  return waits_for(snapshot, table, Batch::kPause);
}

std::vector<OperandWait> plugin_waits(const Snapshot& snapshot, const std::vector<OperandSpec>& table) {
  return waits_for(snapshot, table, Batch::kPlugin);
}

}  // namespace dm::manager
