#include "support/memory_patch.h"

#include <map>
#include <string>

namespace dm::test {
namespace {

using Json = nlohmann::json;

// The merge keys of the lists the flow and node-sim patch (patchMergeKey in the API types); every other list
// is replaced whole.
const std::map<std::string, std::string>& merge_keys() {
  static const std::map<std::string, std::string> k = {
      {"conditions", "type"},        {"addresses", "type"},
      {"containerStatuses", "name"}, {"initContainerStatuses", "name"},
      {"containers", "name"},        {"ownerReferences", "uid"},
  };
  return k;
}

Json strategic(const Json& current, const Json& patch);

Json merge_list(const Json& current, const Json& patch, const std::string& key) {
  if (!current.is_array() || !patch.is_array()) return patch;
  Json out = current;
  for (const auto& p : patch) {
    if (!p.is_object() || !p.contains(key)) return patch;
    bool merged = false;
    for (auto& c : out) {
      if (c.is_object() && c.value(key, Json()) == p[key]) {
        c = strategic(c, p);
        merged = true;
      }
    }
    if (!merged) out.push_back(p);
  }
  return out;
}

Json strategic(const Json& current, const Json& patch) {
  if (!patch.is_object()) return patch;
  Json out = current.is_object() ? current : Json::object();
  for (const auto& [k, v] : patch.items()) {
    if (v.is_null()) {
      out.erase(k);
    } else if (v.is_array() && merge_keys().count(k) > 0) {
      out[k] = merge_list(out.value(k, Json()), v, merge_keys().at(k));
    } else {
      out[k] = strategic(out.value(k, Json()), v);
    }
  }
  return out;
}

Result<Json> json_patch(Json doc, const Json& ops) {
  if (!ops.is_array()) return Error("a JSON patch is an array of operations");
  for (const auto& op : ops) {
    const std::string name = op.value("op", "");
    const Json::json_pointer ptr(op.value("path", ""));
    if (name == "test") {
      if (!doc.contains(ptr) || doc.at(ptr) != op.value("value", Json())) {
        return Error("the test operation on " + ptr.to_string() + " failed");
      }
    } else if (name == "remove") {
      if (!doc.contains(ptr)) return Error("cannot remove " + ptr.to_string() + ": it does not exist");
      doc.at(ptr.parent_pointer()).erase(ptr.back());
    } else if (name == "add" || name == "replace") {
      if (name == "replace" && !doc.contains(ptr)) return Error("cannot replace " + ptr.to_string());
      Json& parent = doc[ptr.parent_pointer()];
      if (parent.is_array()) {
        const std::string& last = ptr.back();
        if (last == "-") {
          parent.push_back(op.value("value", Json()));
        } else {
          const auto i = static_cast<std::ptrdiff_t>(std::stoul(last));
          if (name == "replace") {
            parent[static_cast<size_t>(i)] = op.value("value", Json());
          } else {
            parent.insert(parent.begin() + i, op.value("value", Json()));
          }
        }
      } else {
        doc[ptr] = op.value("value", Json());
      }
    } else {
      return Error("unsupported JSON patch operation \"" + name + "\"");
    }
  }
  return doc;
}

}  // namespace

Result<Json> apply_patch(const Json& current, kube::PatchType type, const Json& patch) {
  switch (type) {
    case kube::PatchType::kMerge: {
      Json out = current;
      out.merge_patch(patch);
      return out;
    }
    case kube::PatchType::kStrategicMerge:
      return strategic(current, patch);
    case kube::PatchType::kJsonPatch:
      try {
        return json_patch(current, patch);
      } catch (const Json::exception& e) {
        return Error(std::string("the JSON patch does not apply: ") + e.what());
      }
  }
  return Error("unknown patch type");
}

}  // namespace dm::test
