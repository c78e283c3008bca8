// The real kernel through libkmod (refcount, holders, removal) plus a /proc scan for the processes holding
// the NVIDIA device nodes, so that a refused unload can say who holds the driver.
#include <fmt/format.h>
#include <libkmod.h>
#include <unistd.h>

#include <memory>
#include <set>

#include "host/fs_util.h"
#include "host/modules.h"

namespace dm::host {
namespace {

struct KmodCtxDeleter {
  void operator()(kmod_ctx* c) const { kmod_unref(c); }
};
struct KmodModuleDeleter {
  void operator()(kmod_module* m) const { kmod_module_unref(m); }
};
using ModulePtr = std::unique_ptr<kmod_module, KmodModuleDeleter>;

class KmodBackend final : public ModuleBackend {
 public:
  explicit KmodBackend(std::string proc_root) : proc_root_(std::move(proc_root)) {
    ctx_.reset(kmod_new(nullptr, nullptr));
  }

  [[nodiscard]] bool loaded(std::string_view name) const override {
    return path_exists("/sys/module/" + std::string(name) + "/refcnt");
  }

  [[nodiscard]] Result<ModuleState> state(std::string_view name) const override {
    ModuleState m;
    m.name = std::string(name);
    if (!loaded(name)) return m;
    auto mod = open(name);
    if (!mod) return mod.error();
    m.loaded = true;
    const int refs = kmod_module_get_refcnt(mod->get());
    if (refs < 0)
      return Error("cannot read the refcount of kernel module " + m.name + ": " + errno_text(-refs));
    m.refcount = refs;
    kmod_list* holders = kmod_module_get_holders(mod->get());
    kmod_list* it = nullptr;
    kmod_list_foreach(it, holders) {
      const ModulePtr h(kmod_module_get_module(it));
      m.holders.emplace_back(kmod_module_get_name(h.get()));
    }
    kmod_module_unref_list(holders);
    m.users = processes_using_module(proc_root_, name);
    return m;
  }

  Status remove(std::string_view name) override {
    if (auto ok = check_removable(name); !ok) return ok;
    auto mod = open(name);
    if (!mod) return mod.error();
    const int err = kmod_module_remove_module(mod->get(), 0);
    if (err < 0)
      return Error("failed to unload kernel module " + std::string(name) + ": " + errno_text(-err));
    return {};
  }

  [[nodiscard]] Result<std::string> proc_modules() const override {
    return read_text_file(proc_root_ + "/modules");
  }

 private:
  [[nodiscard]] Result<ModulePtr> open(std::string_view name) const {
    if (!ctx_) return Error("cannot initialise libkmod (out of memory?)");
    kmod_module* mod = nullptr;
    const int err = kmod_module_new_from_name(ctx_.get(), std::string(name).c_str(), &mod);
    if (err < 0 || mod == nullptr) {
      return Error("cannot look up kernel module " + std::string(name) + ": " + errno_text(-err));
    }
    return ModulePtr(mod);
  }

  std::unique_ptr<kmod_ctx, KmodCtxDeleter> ctx_;
  std::string proc_root_;
};

bool is_device_of(std::string_view module, std::string_view target) {
  constexpr std::string_view kDev = "/dev/";
  if (target.substr(0, kDev.size()) != kDev) return false;
  const std::string_view node = target.substr(kDev.size());
  if (module == "nvidia") {
    if (node == "nvidiactl") return true;
    constexpr std::string_view kGpu = "nvidia";
    if (node.size() <= kGpu.size() || node.substr(0, kGpu.size()) != kGpu) return false;
    for (const char c : node.substr(kGpu.size())) {
      if (c < '0' || c > '9') return false;
    }
    return true;
  }
  if (module == "nvidia_uvm") return node == "nvidia-uvm" || node == "nvidia-uvm-tools";
  if (module == "nvidia_modeset") return node == "nvidia-modeset";
  return false;
}

}  // namespace

std::vector<std::string> processes_using_module(const std::string& proc_root, std::string_view module) {
  std::vector<std::string> users;
  auto pids = list_dir(proc_root);
  if (!pids) return users;
  for (const auto& pid : *pids) {
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string fd_dir = fmt::format("{}/{}/fd", proc_root, pid);
    auto fds = list_dir(fd_dir);
    if (!fds) continue;  // process gone or not ours to inspect
    for (const auto& fd : *fds) {
      char buf[4096];
      const ssize_t n = ::readlink(fmt::format("{}/{}", fd_dir, fd).c_str(), buf, sizeof buf);
      if (n <= 0 || !is_device_of(module, std::string_view(buf, static_cast<size_t>(n)))) continue;
      auto comm = read_text_file(fmt::format("{}/{}/comm", proc_root, pid));
      users.push_back("pid " + pid + " (" + (comm ? std::string(trim(*comm)) : std::string("?")) + ")");
      break;
    }
  }
  return users;
}

std::unique_ptr<ModuleBackend> make_kmod_backend(std::string proc_root) {
  return std::make_unique<KmodBackend>(std::move(proc_root));
}

}  // namespace dm::host
