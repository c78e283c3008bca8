#include "manager/rules/taints.h"

#include <array>
#include <cctype>

namespace dm::manager {

using Json = nlohmann::json;
using kube::Taint;
namespace {

bool alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

// Kubernetes "qualified name" part / label value: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, max 63.
bool valid_name_part(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', alphanumeric at both ends, max 253.
bool valid_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  auto lower_alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
  for (char c : s) {
    if (!lower_alnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

}  // namespace

Result<Taint> parse_taint(std::string_view spec) {
  const std::string quoted = "\"" + std::string(spec) + "\"";
  auto fail = [&](const std::string& why) {
    return Error("invalid taint " + quoted + ": " + why + " (expected key[=value]:effect, e.g. " +
                 std::string(kDefaultGpuClientTaint) + ")");
  };
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) return fail("missing \":<effect>\"");
  if (spec.find(':', colon + 1) != std::string_view::npos) return fail("more than one ':'");
  Taint t;
  t.effect = std::string(spec.substr(colon + 1));
  static constexpr std::array<std::string_view, 3> kEffects = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
  bool effect_ok = false;
  for (auto e : kEffects) effect_ok = effect_ok || t.effect == e;
  if (!effect_ok)
    return fail("effect \"" + t.effect + "\" is not one of NoSchedule, PreferNoSchedule, NoExecute");

  const std::string_view kv = spec.substr(0, colon);
  const auto eq = kv.find('=');
  const std::string_view key = kv.substr(0, eq);
  if (eq != std::string_view::npos) t.value = std::string(kv.substr(eq + 1));
  t.key = std::string(key);

  if (key.empty()) return fail("the key is empty");
  const auto slash = key.find('/');
  std::string_view name = key;
  if (slash != std::string_view::npos) {
    const std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    if (!valid_dns_subdomain(prefix)) {
      return fail(
          "key prefix \"" + std::string(prefix) +
          "\" must be a DNS subdomain (lowercase alphanumerics, '-' and '.', at most 253 characters)");
    }
  }
  if (!valid_name_part(name)) {
    return fail("key name \"" + std::string(name) +
                "\" must be 1-63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric");
  }
  if (!t.value.empty() && !valid_name_part(t.value)) {
    return fail(
        "value \"" + t.value +
        "\" must be at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric");
  }
  return t;
}

bool has_taint_key_effect(const Json& taints, const Taint& taint) {
  if (!taints.is_array()) return false;
  for (const auto& t : taints) {
    const Taint other = kube::taint_from_json(t);
    if (other.key == taint.key && other.effect == taint.effect) return true;
  }
  return false;
}

bool has_exact_taint(const Json& taints, const Taint& taint) {
  if (!taints.is_array()) return false;
  for (const auto& t : taints) {
    if (kube::taint_from_json(t) == taint) return true;
  }
  return false;
}

Json with_taint(const Json& taints, const Taint& taint) {
  Json out = taints.is_array() ? taints : Json::array();
  if (!has_taint_key_effect(out, taint)) out.push_back(taint.to_json());
  return out;
}

Json without_taint(const Json& taints, const Taint& taint) {
  Json out = Json::array();
  if (!taints.is_array()) return out;
  for (const auto& t : taints) {
    if (kube::taint_from_json(t) == taint) continue;
    out.push_back(t);
  }
  return out;
}

}  // namespace dm::manager
