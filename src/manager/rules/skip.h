// The skip-uninstall decision (docs/behaviour.md, Skip-uninstall): keep the loaded driver when its recorded
// configuration digest equals DRIVER_CONFIG_DIGEST. Reads the host's state file only; shared by the flow
// and `plan`.
#pragma once

#include <string>

#include "common/result.h"
#include "host/host.h"
#include "manager/rules/settings.h"

namespace dm::manager {

struct SkipDecision {
  bool skip = false;
  bool checked = false;  // false: FORCE_REINSTALL, the state was not looked at
  std::string log_line;  // what the flow logs about a "no" before any comparison ("" = nothing)
  bool warning = false;  // log_line is a warning
  std::string summary;   // why, in one line, for every outcome
};

SkipDecision decide_skip_uninstall(const Settings& settings, const host::Host& host);

// A kernel that can never unload the loaded driver (built in, module unloading disabled) refuses the run
// before any write, unless the run would keep that driver anyway: the skip path never unloads it.
bool refuse_for_unloadable_driver(const Status& can_unload, const SkipDecision& skip);

}  // namespace dm::manager
