// Kernel-module logic shared by the real and the simulated host: the all-or-nothing unload decision,
// the /proc/modules table, and the backend that reads and removes modules.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "host/host.h"

namespace dm::host {

// What unload_nvidia_modules() will do: remove `order` (holders before the modules they hold), or, if
// `blockers` is non-empty, nothing at all. Each blocker line names one module and what holds it.
struct UnloadPlan {
  std::vector<std::string> order;
  std::vector<std::string> blockers;
  [[nodiscard]] bool allowed() const { return blockers.empty(); }
};

// Decides the unload from the states of the loaded modules of the stack (in kNvidiaModules order): every
// reference to a module must come from another module of the stack, otherwise nothing is removed.
UnloadPlan plan_nvidia_unload(const std::vector<ModuleState>& loaded);

// "nvidia: refcount 3, used by 2 process(es)/pod(s): ns/a, ns/b" for one module, or "" if it is free
// apart from the holders in `stack`.
std::string describe_module_blocker(const ModuleState& m, const std::vector<std::string>& stack);

// The "Module Size Ref Count Used by" table of the /proc/modules lines containing "nvidia".
std::string format_modules_table(std::string_view proc_modules);

// A /proc/modules line ("name size refcnt holders, Live 0x0") for a simulated module.
std::string proc_modules_line(const ModuleState& m);

// Reads and removes kernel modules: libkmod on the real machine, files under a root in simulation.
class ModuleBackend {
 public:
  virtual ~ModuleBackend() = default;
  // Loaded iff <sysfs>/module/<name>/refcnt exists.
  [[nodiscard]] virtual bool loaded(std::string_view name) const = 0;
  [[nodiscard]] virtual Result<ModuleState> state(std::string_view name) const = 0;
  // Removes one module without forcing; an in-use module is an error naming what holds it.
  virtual Status remove(std::string_view name) = 0;
  // The text of /proc/modules.
  [[nodiscard]] virtual Result<std::string> proc_modules() const = 0;

 protected:
  // Why `name` cannot be removed now (not loaded, in use - naming the holders), or ok.
  [[nodiscard]] Status check_removable(std::string_view name) const;
};

// The real kernel through libkmod; users of nvidia* modules are found by scanning `proc_root`/*/fd.
std::unique_ptr<ModuleBackend> make_kmod_backend(std::string proc_root = "/proc");
// The simulated kernel of docs/simulated-host.md rooted at `root`.
std::unique_ptr<ModuleBackend> make_sim_module_backend(std::string root);

// Processes with an open file on a device node of `module` ("pid 42 (nvidia-smi)"), found through
// <proc_root>/<pid>/fd; only nvidia, nvidia_uvm and nvidia_modeset have known device nodes.
std::vector<std::string> processes_using_module(const std::string& proc_root, std::string_view module);

}  // namespace dm::host
