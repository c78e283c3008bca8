#include "manager/rules/paused_record.h"

#include "manager/rules/labels.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

const Json* annotations_of(const Json& node) {
  if (!node.contains("metadata")) return nullptr;
  const Json& md = node["metadata"];
  if (!md.contains("annotations") || !md["annotations"].is_object()) return nullptr;
  return &md["annotations"];
}

std::string label_of(const Json& node, const std::string& key) {
  if (!node.contains("metadata") || !node["metadata"].contains("labels")) return {};
  const Json& labels = node["metadata"]["labels"];
  if (!labels.is_object() || !labels.contains(key) || !labels[key].is_string()) return {};
  return labels[key].get<std::string>();
}

}  // namespace

bool has_paused_record(const Json& node) {
  const Json* a = annotations_of(node);
  return a != nullptr && a->contains(std::string(kPausedLabelsAnnotation));
}

PausedRecord paused_record_of(const Json& node, bool* malformed) {
  if (malformed != nullptr) *malformed = false;
  PausedRecord out;
  const Json* a = annotations_of(node);
  const std::string key(kPausedLabelsAnnotation);
  if (a == nullptr || !a->contains(key)) return out;
  const Json& raw = (*a)[key];
  const Json v =
      raw.is_string() ? Json::parse(raw.get<std::string>(), nullptr, /*allow_exceptions=*/false) : Json();
  bool ok = v.is_object();
  if (ok) {
    for (const auto& [k, val] : v.items()) {
      if (!val.is_string()) {
        ok = false;
        break;
      }
      out[k] = val.get<std::string>();
    }
  }
  if (!ok) {
    out.clear();
    if (malformed != nullptr) *malformed = true;
  }
  return out;
}

std::string paused_record_value(const PausedRecord& record) {
  Json v = Json::object();
  for (const auto& [k, val] : record) v[k] = val;
  return v.dump();
}

PausedRecord merge_paused_record(const PausedRecord& prior, const Json& paused_labels,
                                 const std::map<std::string, std::string>& before) {
  PausedRecord out = prior;
  if (!paused_labels.is_object()) return out;
  for (const auto& [key, value] : paused_labels.items()) {
    if (out.count(key) != 0) continue;
    auto it = before.find(key);
    // A value still holding the marker was left paused by a run that kept no record: heal it as the
    // restore would.
    out[key] = restore_value(it == before.end() ? std::string() : it->second);
  }
  return out;
}

RecordRestoreDecision decide_record_restore(const PausedRecord& record, const Json& node) {
  RecordRestoreDecision decision;
  for (const auto& [key, before] : record) {
    const std::string current = label_of(node, key);
    if (current == before) {
      decision.already_back.push_back(key);
      continue;
    }
    if (current != pause_value(before)) {
      decision.changed_by_others.emplace_back(key, current);
      continue;
    }
    decision.labels[key] = before;
  }
  return decision;
}

}  // namespace dm::manager
