// The vfio-manage command line (docs/behaviour.md, vfio-manage), separate from main() so tests can drive it.
#pragma once

#include <optional>
#include <string_view>

namespace dm::vfio {

// Go's strconv.ParseBool (1 t T TRUE true True / 0 f F FALSE false False); nullopt for anything else.
std::optional<bool> parse_go_bool(std::string_view s);

// Parses argv and environment (HOST_ROOT, BIND_NVSWITCHES, DRIVER_MANAGER_SIM_ROOT), sets up logging
// and runs vfio-manage; returns the process exit code.
int vfio_manage_main(int argc, const char* const* argv);

}  // namespace dm::vfio
