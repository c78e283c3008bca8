// Everything knowable before the first write is checked before it: the settings that only the environment
// can get wrong (names, paths, the vfio-manage binary), and - asked of the API server with
// SelfSubjectAccessReviews, which every authenticated user may create - each permission the chosen path
// needs. A failure here changes nothing on the node and sends no Event.
#pragma once

#include <span>
#include <string>
#include <string_view>
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

// When uninstall_driver needs a permission.
enum class RunNeed {
  kNotUsed,   // the run never asks for it (another command does)
  kAlways,    // every run: preflight asks for it
  kEviction,  // GPU-pod eviction or the full drain is on: preflight asks for it then
  kDra,       // the node carries the operator's DRA driver label: preflight asks for it then
  kOptional,  // used when granted; without it the run goes on and says once what it could not do
};

// One verb on one resource that a command of driver-manager sends. The table of them (permissions()) is the
// one list of what each command asks of the API server: preflight asks for the run's rows, and a unit test
// holds deploy/clusterrole.yaml (the run), deploy/clusterrole-plan.yaml and deploy/plan-job.yaml (plan) and
// deploy/recover-job.yaml (recover) to exactly the rows of their command. A new request in the code is a
// new row here, or that test fails.
struct Permission {
  std::string_view verb = {};
  std::string_view resource = {};  // "nodes", "pods/eviction"
  std::string_view group = {};     // "" = core
  RunNeed run = RunNeed::kNotUsed;
  bool plan = false;          // `plan` sends it (one node or a wave)
  bool recover = false;       // `recover` sends it
  std::string_view why = {};  // what it is used for, for preflight's error
};

// Every permission driver-manager's commands use, one row per verb and resource.
std::span<const Permission> permissions();

// What uninstall_driver needs on its main path with these settings (`dra_on`: the DRA driver is deployed):
// the rows of permissions() whose RunNeed applies, the node's rows for this node alone.
std::vector<AccessCheck> uninstall_access_checks(const Settings& s, bool dra_on);

// Asks the API server about each check. Error naming every denied permission (and the rule to add); ok when
// all are allowed. When the API server cannot answer (an old server, the review API forbidden), logs that
// the check was skipped and returns ok: the requests themselves will say it.
Status check_access(kube::Api& client, const std::vector<AccessCheck>& checks);

}  // namespace dm::manager
