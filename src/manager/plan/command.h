// The `plan` sub-command for one node (the wave's is in wave.h).
#pragma once

#include <string>

#include "manager/rules/settings.h"

namespace dm::manager {

// The sub-command: same settings as uninstall_driver; `output` "text" or "json". Exit 0 when the plan was
// printed, 1 otherwise.
int run_plan(const Settings& settings, const std::string& output);

}  // namespace dm::manager
