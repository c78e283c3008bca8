// The simulated kernel (docs/simulated-host.md): state is read from files under the root exactly as on the
// real machine (<root>/proc/modules if it exists, else synthesised from <root>/sys/module/*/refcnt);
// removal behaves like delete_module(2) without force and, like the kernel, releases the references the
// removed module held - its holders links and the pins listed in <root>/sys/module/<m>/pins/<target> - and
// keeps <root>/proc/modules, if there is one, as the kernel keeps its own.
#include <charconv>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "host/fs_util.h"
#include "host/modules.h"

namespace dm::host {
namespace {

namespace fs = std::filesystem;

class SimModuleBackend final : public ModuleBackend {
 public:
  explicit SimModuleBackend(const std::string& root)
      : ModuleBackend(root + "/proc", root + "/sys"), root_(root) {}

  Status remove(std::string_view name) override {
    if (auto ok = check_removable(name); !ok) return ok;
    auto pins = read_pins(name);
    if (!pins) return pins.error().wrap("failed to unload kernel module " + std::string(name));
    // Gone at once, as delete_module(2) makes it: the directory is moved out of <root>/sys/module in one
    // rename before it is deleted, so a process killed meanwhile never leaves a module half removed (a
    // directory without its refcnt reads as a module built into the kernel).
    std::error_code ec;
    const std::string gone = root_ + "/sys/.unloaded-" + std::string(name);
    fs::remove_all(gone, ec);  // what a run killed after its rename left
    fs::rename(module_dir(name), gone, ec);
    if (ec) {
      return Error::with_errno(ec.value(), "failed to unload kernel module " + std::string(name) +
                                               ": cannot remove " + module_dir(name) + ": " + ec.message());
    }
    fs::remove_all(gone, ec);
    if (auto st = release_links_of(name); !st) return st;
    for (const auto& [target, count] : *pins) {
      if (auto st = release(target, count, name); !st) return st;
    }
    return rewrite_proc_modules(name);
  }

  [[nodiscard]] Result<std::string> proc_modules() const override {
    auto file = read_text_file_if_exists(proc_root() + "/modules");
    if (!file) return file.error();
    if (file->has_value()) return std::move(**file);
    auto names = list_dir(root_ + "/sys/module");
    if (!names) return names.error();
    std::string text;
    for (const auto& n : *names) {
      auto st = read_module_state("", root_ + "/sys/module", n);
      if (st && st->loaded) text += proc_modules_line(*st);
    }
    return text;
  }

 private:
  // <m>/pins/<target> holds the number of references <m> holds on <target> without a holders link.
  [[nodiscard]] Result<std::vector<std::pair<std::string, int>>> read_pins(std::string_view name) const {
    std::vector<std::pair<std::string, int>> pins;
    const std::string dir = module_dir(name) + "/pins/";
    auto targets = list_dir(dir);
    if (!targets) return targets.error();
    for (const auto& t : *targets) {
      const std::string file = dir + t;
      auto text = read_text_file(file);
      if (!text) return text.error();
      const std::string_view v = trim(*text);
      int n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < 0)
        return Error("cannot parse " + file + ": \"" + std::string(v) + "\" is not a count");
      pins.emplace_back(t, n);
    }
    return pins;
  }

  // A /proc/modules file under the root is kept as the kernel keeps its own: the removed module's line goes,
  // and every other line loses it from its "Used by" field and shows the count its refcnt has now.
  Status rewrite_proc_modules(std::string_view removed) {
    const std::string file = proc_root() + "/modules";
    auto text = read_text_file_if_exists(file);
    if (!text) return text.error();
    if (!text->has_value()) return {};
    std::string kept;
    for (const auto& line : split_lines(**text)) {
      auto kept_line = without_module(line, removed);
      if (!kept_line) return kept_line.error();
      if (!kept_line->empty()) kept += *kept_line + "\n";
    }
    return write_existing_file(file, kept);
  }

  // One /proc/modules line ("name size refcnt used_by state address [taints]") once `removed` is gone: ""
  // for its own line; the line unchanged if it is not of that form.
  [[nodiscard]] Result<std::string> without_module(const std::string& line, std::string_view removed) const {
    std::istringstream in(line);
    std::string name, size, refs, used_by;
    if (!(in >> name >> size >> refs >> used_by)) return line;
    if (name == removed) return std::string();
    std::string rest;
    std::getline(in, rest);
    std::string users;
    std::istringstream names(used_by == "-" ? std::string() : used_by);
    for (std::string u; std::getline(names, u, ',');) {
      if (!u.empty() && u != removed) users += u + ",";
    }
    auto refcnt = read_text_file_if_exists(module_dir(name) + "/refcnt");
    if (!refcnt) return refcnt.error();
    if (refcnt->has_value()) refs = std::string(trim(**refcnt));
    return name + " " + size + " " + refs + " " + (users.empty() ? std::string("-") : users) + rest;
  }

  // Like the kernel: a removed module drops the reference it held on each module it depended on.
  Status release_links_of(std::string_view removed) {
    auto names = list_dir(root_ + "/sys/module");
    if (!names) return names.error();
    for (const auto& n : *names) {
      const std::string link = module_dir(n) + "/holders/" + std::string(removed);
      std::error_code ec;
      if (!fs::exists(fs::symlink_status(link, ec))) continue;
      fs::remove(link, ec);
      if (auto st = release(n, 1, removed); !st) return st;
    }
    return {};
  }

  Status release(const std::string& target, int count, std::string_view removed) {
    auto refcnt = read_text_file_if_exists(module_dir(target) + "/refcnt");
    if (!refcnt) return refcnt.error();
    if (!refcnt->has_value()) return {};  // not loaded, or a kernel that keeps no count
    int refs = 0;
    const std::string_view v = trim(**refcnt);
    std::from_chars(v.data(), v.data() + v.size(), refs);
    refs = refs > count ? refs - count : 0;
    auto written = write_existing_file(module_dir(target) + "/refcnt", std::to_string(refs) + "\n");
    if (!written)
      return written.error().wrap("failed to release " + target + " after unloading " + std::string(removed));
    return {};
  }

  std::string root_;
};

}  // namespace

std::unique_ptr<ModuleBackend> make_sim_module_backend(const std::string& root) {
  return std::make_unique<SimModuleBackend>(root);
}

}  // namespace dm::host
