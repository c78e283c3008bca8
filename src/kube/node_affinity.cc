#include "kube/node_affinity.h"

#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

#include "kube/objects.h"

namespace dm::kube {

using Json = nlohmann::json;
namespace {

// Go's strconv.ParseInt(s, 10, 64): an optional sign, then decimal digits only.
std::optional<int64_t> parse_int(std::string_view s) {
  const bool plus = !s.empty() && s.front() == '+';
  if (plus) s.remove_prefix(1);
  if (s.empty() || (plus && s.front() == '-')) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A requirement's values, or nullopt when `values` is present and not an array of strings.
std::optional<std::vector<std::string>> values_of(const Json& req) {
  std::vector<std::string> out;
  const auto it = req.find("values");
  if (it == req.end() || it->is_null()) return out;
  if (!it->is_array()) return std::nullopt;
  for (const auto& v : *it) {
    if (!v.is_string()) return std::nullopt;
    out.push_back(v.get<std::string>());
  }
  return out;
}

bool contains(const std::vector<std::string>& values, const std::string& v) {
  for (const auto& x : values) {
    if (x == v) return true;
  }
  return false;
}

// How a requirement reads the node: matched or not, or invalid (the whole term then matches nothing).
enum class Match { kYes, kNo, kInvalid };

Match yes_if(bool b) {
  return b ? Match::kYes : Match::kNo;
}

// One matchExpressions entry against the node's labels (labels.Requirement of apimachinery).
Match label_requirement(const Json& req, const std::map<std::string, std::string>& labels) {
  if (!req.is_object()) return Match::kInvalid;
  const std::string* key = find_string(req, {"key"});
  const std::string* op = find_string(req, {"operator"});
  const auto values = values_of(req);
  if (key == nullptr || key->empty() || op == nullptr || !values) return Match::kInvalid;
  const auto it = labels.find(*key);
  const bool has = it != labels.end();
  if (*op == "In" || *op == "NotIn") {
    if (values->empty()) return Match::kInvalid;
    const bool in = has && contains(*values, it->second);
    return yes_if(*op == "In" ? in : !in);
  }
  if (*op == "Exists" || *op == "DoesNotExist") {
    if (!values->empty()) return Match::kInvalid;
    return yes_if(*op == "Exists" ? has : !has);
  }
  if (*op == "Gt" || *op == "Lt") {
    const auto bound = values->size() == 1 ? parse_int(values->front()) : std::nullopt;
    if (!bound) return Match::kInvalid;
    const auto v = has ? parse_int(it->second) : std::nullopt;
    if (!v) return Match::kNo;
    return yes_if(*op == "Gt" ? *v > *bound : *v < *bound);
  }
  return Match::kInvalid;
}

// One matchFields entry: metadata.name only, In or NotIn with exactly one value.
Match field_requirement(const Json& req, const std::string& node_name) {
  if (!req.is_object()) return Match::kInvalid;
  const std::string* key = find_string(req, {"key"});
  const std::string* op = find_string(req, {"operator"});
  const auto values = values_of(req);
  if (key == nullptr || *key != "metadata.name" || op == nullptr || !values || values->size() != 1) {
    return Match::kInvalid;
  }
  if (*op == "In") return yes_if(node_name == values->front());
  if (*op == "NotIn") return yes_if(node_name != values->front());
  return Match::kInvalid;
}

// A list of requirements of one term, ANDed; an invalid one makes the list invalid.
template <class Check>
Match all_of(const Json* list, Check check) {
  if (list == nullptr || list->is_null()) return Match::kYes;
  if (!list->is_array()) return Match::kInvalid;
  Match out = Match::kYes;
  for (const auto& req : *list) {
    const Match m = check(req);
    if (m == Match::kInvalid) return m;
    if (m == Match::kNo) out = Match::kNo;
  }
  return out;
}

bool non_empty_array(const Json* j) {
  return j != nullptr && j->is_array() && !j->empty();
}

bool term_matches(const Json& term, const NodePlacement& node) {
  if (!term.is_object()) return false;
  const Json* exprs = find(term, {"matchExpressions"});
  const Json* fields = find(term, {"matchFields"});
  // A null or empty term selects no objects.
  if (!non_empty_array(exprs) && !non_empty_array(fields)) return false;
  const Match labels = all_of(exprs, [&](const Json& r) { return label_requirement(r, node.labels); });
  const Match names = all_of(fields, [&](const Json& r) { return field_requirement(r, node.name); });
  return labels == Match::kYes && names == Match::kYes;
}

const Json* required_affinity(const Json& pod) {
  return find(pod, {"spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"});
}

}  // namespace

bool node_selector_matches(const Json& pod, const NodePlacement& node) {
  const Json* selector = find(pod, {"spec", "nodeSelector"});
  if (selector == nullptr || !selector->is_object()) return true;
  for (const auto& [k, v] : selector->items()) {
    const auto it = node.labels.find(k);
    if (it == node.labels.end() || !v.is_string() || it->second != v.get_ref<const std::string&>())
      return false;
  }
  return true;
}

bool required_node_affinity_matches(const Json& pod, const NodePlacement& node) {
  const Json* required = required_affinity(pod);
  if (required == nullptr || required->is_null()) return true;
  const Json* terms = find(*required, {"nodeSelectorTerms"});
  if (terms == nullptr || !terms->is_array()) return false;
  for (const auto& term : *terms) {
    if (term_matches(term, node)) return true;
  }
  return false;
}

bool pod_fits_node(const Json& pod, const NodePlacement& node) {
  return node_selector_matches(pod, node) && required_node_affinity_matches(pod, node);
}

std::set<std::string> required_node_affinity_keys(const Json& pod) {
  std::set<std::string> keys;
  const Json* required = required_affinity(pod);
  const Json* terms = required != nullptr ? find(*required, {"nodeSelectorTerms"}) : nullptr;
  if (terms == nullptr || !terms->is_array()) return keys;
  for (const auto& term : *terms) {
    const Json* exprs = term.is_object() ? find(term, {"matchExpressions"}) : nullptr;
    if (exprs == nullptr || !exprs->is_array()) continue;
    for (const auto& req : *exprs) {
      const std::string* key = req.is_object() ? find_string(req, {"key"}) : nullptr;
      if (key != nullptr) keys.insert(*key);
    }
  }
  return keys;
}

}  // namespace dm::kube
