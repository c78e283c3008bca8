// The real kernel: state read from /proc/modules and /sys/module (shared with the simulated kernel), the
// removal itself with delete_module(2), never forced and without waiting for the module to become unused:
// what `rmmod` and libkmod do, without loading libkmod and the compression and crypto libraries it links.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

#include "host/fs_util.h"
#include "host/modules.h"

namespace dm::host {
namespace {

class KernelBackend final : public ModuleBackend {
 public:
  using ModuleBackend::ModuleBackend;

  Status remove(std::string_view name) override {
    if (auto ok = check_removable(name); !ok) return ok;
    const std::string module(name);
    // O_NONBLOCK: fail at once instead of waiting for the module to become unused. The kernel answers
    // EWOULDBLOCK (EAGAIN) for a module in use or held by another, EBUSY for a permanent one or one still
    // loading or going away.
    if (syscall(SYS_delete_module, module.c_str(), O_NONBLOCK) != 0) {
      const int err = errno;
      return Error::from_errno(err, "failed to unload kernel module " + std::string(name));
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<ModuleBackend> make_kernel_backend(std::string proc_root, std::string sys_root) {
  return std::make_unique<KernelBackend>(std::move(proc_root), std::move(sys_root));
}

}  // namespace dm::host
