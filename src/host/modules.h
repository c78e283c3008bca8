// Kernel-module logic shared by the real and the simulated host: reading a module's state from /proc/modules
// and /sys/module, the all-or-nothing unload decision, the /proc/modules table, and the backend that removes
// modules.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "host/devices.h"
#include "host/host.h"

namespace dm::host {

// References a member of the NVIDIA stack holds on another without a holders link (so "Used by" does not
// show them): nvidia_vgpu_vfio pins `nvidia` twice on a vGPU host. `count` is the most it holds; a holders
// link, if there is one, is one of them.
struct UnlinkedReference {
  std::string_view holder;
  std::string_view target;
  int count;
};
inline constexpr UnlinkedReference kUnlinkedReferences[] = {{"nvidia_vgpu_vfio", "nvidia", 2}};

// What unload_nvidia_modules() will do: remove `order` (holders before the modules they hold), or, if
// `blockers` is non-empty, nothing at all. Each blocker line names one module and what holds it.
struct UnloadDecision {
  std::vector<std::string> order;
  std::vector<std::string> blockers;
  [[nodiscard]] bool allowed() const { return blockers.empty(); }
};

// Decides the unload from the states of the loaded modules of the stack (in kNvidiaModules order): every
// reference to a module must come from another module of the stack (a holders link or a
// kUnlinkedReferences pin) and no process may have its device files open, otherwise nothing is removed.
UnloadDecision decide_nvidia_unload(const std::vector<ModuleState>& loaded);

// "nvidia: refcount 3, 2 other reference(s), device files open in pid 42 (x)" for one module, or "" if it
// is free apart from the references of the modules in `stack`.
std::string describe_module_blocker(const ModuleState& m, const std::vector<std::string>& stack);

// Why the kernel can never unload this stack - a member built into the kernel or permanent, or a kernel
// without module unloading - with what the node needs; ok otherwise.
Status check_stack_unloadable(const std::vector<ModuleState>& stack);

// The "Module Size Ref Count Used by" table of the /proc/modules lines whose module is one of
// kNvidiaModules or has "nvidia" in its name (not a module whose "Used by" merely names one, such as drm).
std::string format_modules_table(std::string_view proc_modules);

// A /proc/modules line ("name size refcnt holders,[permanent], Live 0x0") for a simulated module.
std::string proc_modules_line(const ModuleState& m);

// The state of one module (users not filled in) from the text of /proc/modules and the directory
// <sys_module_dir>/<name>: loaded iff /proc/modules lists it or it has an initstate or refcnt file; built in
// iff its directory exists otherwise; refcount from refcnt, else from /proc/modules, where "-" means the
// kernel cannot unload modules; holders from holders/, else from /proc/modules; permanent iff its
// /proc/modules line says "[permanent]" (in the holders field, never a holder's name).
Result<ModuleState> read_module_state(std::string_view proc_modules, const std::string& sys_module_dir,
                                      std::string_view name);

// Reads and removes kernel modules: delete_module(2) on the real machine, files under a root in simulation.
// Both read <proc_root>/modules, <sys_root>/module/<m> and the processes of <proc_root>.
class ModuleBackend {
 public:
  ModuleBackend(std::string proc_root, std::string sys_root);
  virtual ~ModuleBackend() = default;
  ModuleBackend(const ModuleBackend&) = delete;
  ModuleBackend& operator=(const ModuleBackend&) = delete;

  [[nodiscard]] Result<ModuleState> state(std::string_view name) const;
  [[nodiscard]] bool loaded(std::string_view name) const;
  // Removes one module without forcing, answering as delete_module(2) does: an in-use module (held by
  // another, or referenced) is EAGAIN naming what holds it, a permanent one EBUSY.
  virtual Status remove(std::string_view name) = 0;
  // The text of /proc/modules.
  [[nodiscard]] virtual Result<std::string> proc_modules() const;
  // The processes with NVIDIA device files open (majors from <proc_root>/devices, DRM nodes attributed
  // through <sys_root>/dev/char).
  [[nodiscard]] std::vector<HolderProcess> holder_processes() const;

 protected:
  // Why `name` cannot be removed now (not loaded, built in, no module unloading, held, permanent, in use),
  // or ok: the kernel's errno where the kernel would refuse, in its order.
  [[nodiscard]] Status check_removable(std::string_view name) const;
  [[nodiscard]] const std::string& proc_root() const { return proc_root_; }
  [[nodiscard]] std::string module_dir(std::string_view name) const;

 private:
  std::string proc_root_;
  std::string sys_root_;
};

// The real kernel: state from /proc and /sys (roots replaceable for tests), removal with delete_module(2).
std::unique_ptr<ModuleBackend> make_kernel_backend(std::string proc_root = "/proc",
                                                   std::string sys_root = "/sys");
// The simulated kernel of docs/simulated-host.md rooted at `root`.
std::unique_ptr<ModuleBackend> make_sim_module_backend(const std::string& root);

}  // namespace dm::host
