// The skip-uninstall decision (docs/behaviour.md, Skip-uninstall): keep the loaded driver when its recorded
// configuration digest equals DRIVER_CONFIG_DIGEST. Decided from the settings and, when they do not decide
// alone, the host's driver state file as the caller read it (manager/commands/command: read_skip_decision);
// shared by the flow and `plan`.
#pragma once

#include <optional>
#include <string>

#include "common/result.h"
#include "manager/rules/settings.h"

namespace dm::manager {

struct SkipDecision {
  bool skip = false;
  bool checked = false;  // false: FORCE_REINSTALL, the state was not looked at
  std::string log_line;  // what the flow logs about a "no" before any comparison ("" = nothing)
  bool warning = false;  // log_line is a warning
  std::string summary;   // why, in one line, for every outcome
};

// FORCE_REINSTALL, or no DRIVER_CONFIG_DIGEST: the settings decide alone. nullopt: the driver state file
// decides (skip_from_driver_state), and only then is it read.
std::optional<SkipDecision> skip_from_settings(const Settings& settings);

// The decision from the driver state file (host::kDriverStateFile) as read: its content, nullopt when there
// is none, or the error of the read.
SkipDecision skip_from_driver_state(const Settings& settings,
                                    const Result<std::optional<std::string>>& state);

// A kernel that can never unload the loaded driver (built in, module unloading disabled) refuses the run
// before any write, unless the run would keep that driver anyway: the skip path never unloads it.
bool refuse_for_unloadable_driver(const Status& can_unload, const SkipDecision& skip);

}  // namespace dm::manager
