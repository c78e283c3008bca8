#include "manager/rules/pdb.h"

#include <fmt/format.h>

#include "kube/objects.h"

namespace dm::manager {

using Json = nlohmann::json;

namespace {

std::string join_values(const Json& values) {
  std::string out;
  if (!values.is_array()) return out;
  for (const auto& v : values) {
    if (!v.is_string()) continue;
    out += (out.empty() ? "" : ",") + v.get<std::string>();
  }
  return out;
}

int64_t status_int(const Json& pdb, std::string_view key) {
  const Json* v = kube::find(pdb, {"status", key});
  return v != nullptr && v->is_number_integer() ? v->get<int64_t>() : 0;
}

}  // namespace

std::optional<LabelSelector> pdb_selector(const Json& pdb, const std::string& api_version) {
  const Json* found = kube::find(pdb, {"spec", "selector"});
  if (found == nullptr || !found->is_object()) return std::nullopt;
  const Json& sel = *found;
  std::string text;
  auto add = [&text](const std::string& req) { text += (text.empty() ? "" : ",") + req; };
  if (sel.contains("matchLabels") && sel["matchLabels"].is_object()) {
    for (const auto& [k, v] : sel["matchLabels"].items()) {
      if (v.is_string()) add(k + "=" + v.get<std::string>());
    }
  }
  if (sel.contains("matchExpressions") && sel["matchExpressions"].is_array()) {
    for (const auto& e : sel["matchExpressions"]) {
      const std::string key = e.value("key", "");
      const std::string op = e.value("operator", "");
      const Json values = e.contains("values") ? e["values"] : Json::array();
      if (op == "In") {
        add(key + " in (" + join_values(values) + ")");
      } else if (op == "NotIn") {
        add(key + " notin (" + join_values(values) + ")");
      } else if (op == "Exists") {
        add(key);
      } else if (op == "DoesNotExist") {
        add("!" + key);
      } else {
        return std::nullopt;
      }
    }
  }
  if (text.empty() && api_version != "v1") return std::nullopt;
  auto parsed = LabelSelector::parse(text);
  if (!parsed) return std::nullopt;
  return *parsed;
}

std::vector<PdbImpact> pdb_impacts(const std::vector<Json>& pdbs, const std::string& api_version,
                                   const std::vector<Json>& pods_to_evict) {
  std::vector<PdbImpact> out;
  for (const auto& pdb : pdbs) {
    const std::string ns = kube::namespace_of(pdb);
    const auto selector = pdb_selector(pdb, api_version);
    if (!selector) continue;
    PdbImpact impact;
    impact.pdb = kube::ref_string(pdb);
    for (const auto& pod : pods_to_evict) {
      if (kube::namespace_of(pod) != ns) continue;
      const Json* labels = kube::find(pod, {"metadata", "labels"});
      if (selector->matches(labels != nullptr ? *labels : Json()))
        impact.pods.push_back(kube::ref_string(pod));
    }
    if (impact.pods.empty()) continue;
    impact.disruptions_allowed = status_int(pdb, "disruptionsAllowed");
    const auto n = static_cast<int64_t>(impact.pods.size());
    impact.blocks = impact.disruptions_allowed < n;
    const std::string health = fmt::format(
        "currentHealthy {}, desiredHealthy {}, expectedPods {}", status_int(pdb, "currentHealthy"),
        status_int(pdb, "desiredHealthy"), status_int(pdb, "expectedPods"));
    if (impact.disruptions_allowed <= 0) {
      impact.why = fmt::format(
          "allows no disruption now ({}): each eviction is refused and retried until the budget allows it "
          "or the deadline passes",
          health);
    } else if (impact.blocks) {
      impact.why = fmt::format(
          "allows {} disruption(s) for {} pod(s) to evict ({}): the rest wait until the evicted ones are "
          "replaced and healthy elsewhere",
          impact.disruptions_allowed, n, health);
    } else {
      impact.why = fmt::format("allows {} disruption(s) for {} pod(s) to evict ({})",
                               impact.disruptions_allowed, n, health);
    }
    out.push_back(std::move(impact));
  }
  return out;
}

}  // namespace dm::manager
