// Everything knowable before the first write is checked before it: the settings that only the environment
// can get wrong (names, paths, the vfio-manage binary), and - asked of the API server with
// SelfSubjectAccessReviews, which every authenticated user may create - each permission the chosen path
// needs. A failure here changes nothing on the node and sends no Event.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "kube/api.h"
#include "manager/rules/settings.h"

namespace dm::manager {

// Kubernetes name rules (apimachinery validation): a DNS-1123 label (namespaces) and a qualified name
// (label keys: an optional DNS-1123 subdomain prefix and "/", then up to 63 characters).
bool is_dns1123_label(std::string_view s);
bool is_qualified_name(std::string_view s);

// Where `program` resolves to: itself when it contains a '/', else the first executable file of that name
// in the directories of `path_env` (PATH). Empty when there is none.
std::string resolve_executable(const std::string& program, const std::string& path_env);

// Checks of the settings that need no API server: every problem, each naming its variable.
std::vector<std::string> settings_problems(const Settings& s, const std::string& path_env);

// One permission a path needs.
struct AccessCheck {
  std::string verb;
  std::string resource;  // "nodes", "pods", ...
  std::string subresource;
  std::string group;  // "" = core
  std::string ns;     // "" = all namespaces / cluster-scoped
  std::string name;
  std::string why;                             // what it is used for, for the error
  [[nodiscard]] std::string describe() const;  // e.g. "create pods/eviction"
};

// What uninstall_driver may need on its main path with these settings (`dra_on`: the DRA driver is deployed).
std::vector<AccessCheck> uninstall_access_checks(const Settings& s, bool dra_on);

// Asks the API server about each check. Error naming every denied permission (and the rule to add); ok when
// all are allowed. When the API server cannot answer (an old server, the review API forbidden), logs that
// the check was skipped and returns ok: the requests themselves will say it.
Status check_access(kube::Api& client, const std::vector<AccessCheck>& checks);

}  // namespace dm::manager
