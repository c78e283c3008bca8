#include "host/devices.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>
#include <system_error>

#include "host/cgroup.h"
#include "host/fs_util.h"
#include "host/host.h"

namespace dm::host {
namespace {

constexpr unsigned kModesetMinor =
    254;  // /dev/nvidia-modeset, served by nvidia_modeset through nvidia's major

// The name nvidia registers its GPUs' and control device's major under: `nvidia` (with `nvidiactl`), or
// `nvidia-frontend` on drivers up to 535 (nv-frontend, which also serves nvidia_modeset's minor).
bool is_nvidia_major_name(std::string_view name) {
  return name == "nvidia" || name == "nvidia-frontend";
}

// The module registering each NVIDIA character-device name of /proc/devices.
std::string module_of_name(std::string_view name) {
  if (name == "nvidia-uvm") return "nvidia_uvm";
  if (is_nvidia_major_name(name) || name == "nvidiactl" || name == "nvidia-caps" ||
      name == "nvidia-caps-imex-channels" || name == "nvidia-nvswitch" || name == "nvidia-nvlink")
    return "nvidia";
  return {};
}

bool in_nvidia_stack(std::string_view module) {
  return std::find(std::begin(kNvidiaModules), std::end(kNvidiaModules), module) != std::end(kNvidiaModules);
}

// The module owning the character device `rdev` for the holder scan: an NVIDIA major's, or a DRM node's
// through sysfs, each DRM device number resolved once (`drm_seen`).
std::string owner_of(dev_t rdev, const NvidiaDevices& devices, const std::string& sys_root,
                     std::map<dev_t, std::string>& drm_seen) {
  if (!devices.is_drm(rdev)) return devices.module_of(rdev);
  const auto [it, added] = drm_seen.try_emplace(rdev);
  if (added) it->second = drm_module_of(sys_root, rdev);
  return it->second;
}

}  // namespace

NvidiaDevices NvidiaDevices::parse(std::string_view proc_devices) {
  NvidiaDevices d;
  bool chr = false;
  for (const auto& raw : split_lines(proc_devices)) {
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (line.back() == ':') {  // "Character devices:" / "Block devices:"
      chr = line == "Character devices:";
      continue;
    }
    if (!chr) continue;
    unsigned major = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), major);
    if (ec != std::errc()) continue;
    const std::string_view name = trim(line.substr(static_cast<size_t>(end - line.data())));
    if (name == "drm") d.drm_majors_.insert(major);
    std::string module = module_of_name(name);
    if (module.empty()) continue;
    if (is_nvidia_major_name(name)) d.nvidia_major_ = major;
    d.module_of_major_[major] = std::move(module);
  }
  return d;
}

std::string NvidiaDevices::module_of(dev_t rdev) const {
  const unsigned major = ::major(rdev);
  if (major == 0) return {};
  if (major == nvidia_major_ && ::minor(rdev) == kModesetMinor) return "nvidia_modeset";
  const auto it = module_of_major_.find(major);
  return it == module_of_major_.end() ? std::string() : it->second;
}

bool NvidiaDevices::is_drm(dev_t rdev) const {
  return drm_majors_.contains(::major(rdev));
}

std::string drm_module_of(const std::string& sys_root, dev_t rdev) {
  const std::string link =
      fmt::format("{}/dev/char/{}:{}/device/driver/module", sys_root, ::major(rdev), ::minor(rdev));
  std::error_code ec;
  const std::string module = std::filesystem::read_symlink(link, ec).filename().string();
  if (ec || !in_nvidia_stack(module)) return {};
  return module == "nvidia" ? std::string("nvidia_drm") : module;
}

std::string HolderProcess::label() const {
  return fmt::format("pid {} ({})", pid, comm);
}

std::vector<HolderProcess> find_holder_processes(const std::string& proc_root, const std::string& sys_root,
                                                 const NvidiaDevices& devices) {
  std::vector<HolderProcess> out;
  if (devices.empty()) return out;
  std::map<dev_t, std::string> drm_seen;
  auto pids = list_dir(proc_root);
  if (!pids) return out;
  for (const auto& name : *pids) {
    int pid = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc() || end != name.data() + name.size() || pid <= 0) continue;
    const std::string dir = fmt::format("{}/{}", proc_root, name);
    auto fds = list_dir(dir + "/fd");
    if (!fds) continue;  // gone, or not ours to inspect
    std::set<std::string> modules;
    const std::string fd_dir = dir + "/fd/";
    for (const auto& fd : *fds) {
      struct stat st {};
      const std::string link = fd_dir + fd;
      if (::stat(link.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
      auto m = owner_of(st.st_rdev, devices, sys_root, drm_seen);
      if (m.empty()) continue;
      // /dev/nvidia-modeset is a minor of nvidia's own character device: its open file holds a reference
      // on nvidia (the file's owner) as well as on nvidia_modeset (which serves it).
      if (m == "nvidia_modeset") modules.insert("nvidia");
      modules.insert(std::move(m));
    }
    if (modules.empty()) continue;
    HolderProcess p;
    p.pid = pid;
    auto comm = read_text_file(dir + "/comm");
    p.comm = comm ? std::string(trim(*comm)) : std::string("?");
    if (auto cgroup = read_text_file(dir + "/cgroup")) p.pod_uid = pod_uid_from_cgroup(*cgroup).value_or("");
    p.modules.assign(modules.begin(), modules.end());
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace dm::host
