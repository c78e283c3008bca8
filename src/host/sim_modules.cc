// The simulated kernel (docs/simulated-host.md): a module is loaded iff <root>/sys/module/<m>/refcnt exists;
// its holders are the entries of <root>/sys/module/<m>/holders and its users the lines of
// <root>/sys/module/<m>/users (written by node-sim). Removal behaves like delete_module(2) without force.
#include <charconv>
#include <filesystem>
#include <system_error>

#include "host/fs_util.h"
#include "host/modules.h"

namespace dm::host {
namespace {

namespace fs = std::filesystem;

class SimModuleBackend final : public ModuleBackend {
 public:
  explicit SimModuleBackend(std::string root) : root_(std::move(root)) {}

  [[nodiscard]] bool loaded(std::string_view name) const override {
    return path_exists(module_dir(name) + "/refcnt");
  }

  [[nodiscard]] Result<ModuleState> state(std::string_view name) const override {
    ModuleState m;
    m.name = std::string(name);
    const std::string dir = module_dir(name);
    auto refcnt = read_text_file_if_exists(dir + "/refcnt");
    if (!refcnt) return refcnt.error();
    if (!refcnt->has_value()) return m;
    m.loaded = true;
    const std::string_view text = trim(**refcnt);
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), m.refcount);
    if (ec != std::errc() || end != text.data() + text.size() || m.refcount < 0) {
      return Error("cannot parse " + dir + "/refcnt: \"" + std::string(text) +
                   "\" is not a reference count (the simulated kernel expects a decimal number)");
    }
    auto holders = list_dir(dir + "/holders");
    if (!holders) return holders.error();
    m.holders = std::move(holders).value();
    auto users = read_text_file_if_exists(dir + "/users");
    if (!users) return users.error();
    if (users->has_value()) {
      for (const auto& line : split_lines(**users)) {
        const auto u = trim(line);
        if (!u.empty()) m.users.emplace_back(u);
      }
    }
    return m;
  }

  Status remove(std::string_view name) override {
    if (auto ok = check_removable(name); !ok) return ok;
    std::error_code ec;
    fs::remove_all(module_dir(name), ec);
    if (ec) {
      return Error("failed to unload kernel module " + std::string(name) + ": cannot remove " +
                   module_dir(name) + ": " + ec.message());
    }
    return release_references_of(name);
  }

  [[nodiscard]] Result<std::string> proc_modules() const override {
    auto file = read_text_file_if_exists(root_ + "/proc/modules");
    if (!file) return file.error();
    if (file->has_value()) return std::move(**file);
    auto names = list_dir(root_ + "/sys/module");
    if (!names) return names.error();
    std::string text;
    for (const auto& n : *names) {
      auto st = state(n);
      if (st && st->loaded) text += proc_modules_line(*st);
    }
    return text;
  }

 private:
  [[nodiscard]] std::string module_dir(std::string_view name) const {
    return root_ + "/sys/module/" + std::string(name);
  }

  // Like the kernel: a removed module drops the reference it held on each module it depended on.
  Status release_references_of(std::string_view removed) {
    auto names = list_dir(root_ + "/sys/module");
    if (!names) return names.error();
    for (const auto& n : *names) {
      const std::string link = module_dir(n) + "/holders/" + std::string(removed);
      std::error_code ec;
      if (!fs::exists(fs::symlink_status(link, ec))) continue;
      fs::remove(link, ec);
      auto st = state(n);
      if (!st || !st->loaded) continue;
      const int refs = st->refcount > 0 ? st->refcount - 1 : 0;
      auto written = write_existing_file(module_dir(n) + "/refcnt", std::to_string(refs) + "\n");
      if (!written)
        return written.error().wrap("failed to release " + n + " after unloading " + std::string(removed));
    }
    return {};
  }

  std::string root_;
};

}  // namespace

std::unique_ptr<ModuleBackend> make_sim_module_backend(std::string root) {
  return std::make_unique<SimModuleBackend>(std::move(root));
}

}  // namespace dm::host
