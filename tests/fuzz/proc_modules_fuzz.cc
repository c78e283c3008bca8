// /proc/modules (host/modules): each NVIDIA module's state read from it (no /sys/module entry, as on a
// kernel whose sysfs says nothing), the unload decision over them, and the module table for the log.
#include "fuzz_support.h"
#include "host/host.h"
#include "host/modules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = dm::fuzz::text(data, size);
  const std::string sys_module = dm::fuzz::scratch_dir() + "/no-sys-module";
  std::vector<dm::host::ModuleState> loaded;
  std::vector<std::string> stack;
  for (const auto name : dm::host::kNvidiaModules) {
    auto state = dm::host::read_module_state(text, sys_module, name);
    if (state && state->loaded) {
      loaded.push_back(*state);
      stack.emplace_back(name);
    }
  }
  const auto plan = dm::host::decide_nvidia_unload(loaded);
  if (plan.allowed() && plan.order.size() != loaded.size()) dm::fuzz::fail("an unload plan without a module");
  for (const auto& m : loaded) {
    (void)dm::host::describe_module_blocker(m, stack);
    (void)dm::host::proc_modules_line(m);
  }
  (void)dm::host::check_stack_unloadable(loaded);
  (void)dm::host::format_modules_table(text);
  return 0;
}
