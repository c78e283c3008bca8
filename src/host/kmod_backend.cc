// The real kernel: state read from /proc/modules and /sys/module (shared with the simulated kernel), the
// removal itself through libkmod (delete_module(2) without force).
#include <libkmod.h>

#include <memory>

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
  KmodBackend(std::string proc_root, std::string sys_root)
      : ModuleBackend(std::move(proc_root), std::move(sys_root)) {
    ctx_.reset(kmod_new(nullptr, nullptr));
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
};

}  // namespace

std::unique_ptr<ModuleBackend> make_kmod_backend(std::string proc_root, std::string sys_root) {
  return std::make_unique<KmodBackend>(std::move(proc_root), std::move(sys_root));
}

}  // namespace dm::host
