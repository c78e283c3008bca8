// The vfio-manage command line (docs/behaviour.md, vfio-manage), separate from main() so tests can drive it.
#pragma once

#include <optional>
#include <string_view>

namespace dm::vfio {

// Parses argv and environment (HOST_ROOT, BIND_NVSWITCHES, DRIVER_MANAGER_SIM_ROOT), sets up logging
// and runs vfio-manage; returns the process exit code.
int vfio_manage_main(int argc, const char* const* argv);

}  // namespace dm::vfio
