#include "manager/pods/holders.h"

#include <fmt/format.h>

#include <map>

namespace dm::manager {

std::vector<std::string> describe_holders(const std::vector<host::HolderProcess>& holders,
                                          const PodList& pods) {
  std::map<std::string, std::string> pod_by_uid;
  for (const auto& p : pods) {
    const auto md = p.value("metadata", nlohmann::json::object());
    const std::string key = md.value("namespace", "") + "/" + md.value("name", "");
    const std::string uid = md.value("uid", "");
    if (!uid.empty()) pod_by_uid[uid] = key;
    // A static pod's processes run under its own UID (the hash the mirror pod carries), not the mirror's.
    const auto annotations = md.value("annotations", nlohmann::json::object());
    const std::string mirror = annotations.value("kubernetes.io/config.mirror", "");
    if (!mirror.empty()) pod_by_uid[mirror] = key;
  }
  std::vector<std::string> out;
  out.reserve(holders.size());
  for (const auto& h : holders) {
    std::string where;
    if (h.pod_uid.empty()) {
      where = ", a host process, not a pod";
    } else if (auto it = pod_by_uid.find(h.pod_uid); it != pod_by_uid.end()) {
      where = " in pod " + it->second;
    } else {
      where = " in pod with UID " + h.pod_uid + " (not among this node's pods)";
    }
    out.push_back(fmt::format("{}: held by {}{}", fmt::join(h.modules, ", "), h.label(), where));
  }
  return out;
}

Error name_driver_holders(const Error& error, const std::vector<host::HolderProcess>& holders,
                          const PodList& pods) {
  const auto lines = describe_holders(holders, pods);
  if (lines.empty()) return error;
  Error named = error;
  named.message += fmt::format(". {}", fmt::join(lines, "; "));
  return named;
}

}  // namespace dm::manager
