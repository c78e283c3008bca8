// The simulated host as a host contract scenario: the files of docs/simulated-host.md under a temporary root,
// written as the real kernel shows the stub modules of tests/kernel/modules (the same registrations, device
// numbers, holders links and references), so that the Host reads the same node on both sides.
//
// What the scenario plays here is the kernel's part: loading a module (its sysfs directory, holders links on
// what it depends on, its registrations in /proc/devices, its device nodes, /proc/modules), a process opening
// a device file (DIR/proc/<pid>/fd, and the reference the open file takes on each module serving it), and
// closing it. Removal is the simulated kernel's own (src/host/sim_modules.cc).
#include <fmt/format.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>

#include "host/modules.h"
#include "support/host_scenario.h"

namespace dm::test::host_contract {
namespace {

namespace fs = std::filesystem;

// A character-device registration of /proc/devices, the module that makes it, its major.
struct Registration {
  std::string_view name;
  std::string_view module;
  unsigned major;
};
// 195 is nvidia's fixed major (`nvidia-frontend` instead of `nvidia` when loaded with frontend=1), 226 the
// DRM core's; the kernel gives the others dynamically: these are numbers it could give.
constexpr Registration kRegistrations[] = {
    {"nvidia", "nvidia", 195},
    {"drm", "drm", 226},
    {"nvidia-caps-imex-channels", "nvidia", 509},
    {"nvidia-caps", "nvidia", 510},
    {"nvidia-uvm", "nvidia_uvm", 511},
};

// A device node: its registration and minor, and the modules an open file of it holds a reference on (the
// one owning the character device, and the one it forwards to: nvidia_modeset for minor 254 of nvidia).
struct Device {
  std::string_view path;
  std::string_view registration;
  unsigned minor;
  std::vector<std::string_view> holds;
};
const std::vector<Device>& devices() {
  static const std::vector<Device> all = {
      {"/dev/nvidia0", "nvidia", 0, {"nvidia"}},
      {"/dev/nvidia1", "nvidia", 1, {"nvidia"}},
      {"/dev/nvidiactl", "nvidia", 255, {"nvidia"}},
      {"/dev/nvidia-modeset", "nvidia", 254, {"nvidia", "nvidia_modeset"}},
      {"/dev/nvidia-caps/nvidia-cap1", "nvidia-caps", 1, {"nvidia"}},
      {"/dev/nvidia-caps/nvidia-cap2", "nvidia-caps", 2, {"nvidia"}},
      {"/dev/nvidia-caps-imex-channels/channel0", "nvidia-caps-imex-channels", 0, {"nvidia"}},
      {"/dev/nvidia-uvm", "nvidia-uvm", 0, {"nvidia_uvm"}},
      {"/dev/nvidia-uvm-tools", "nvidia-uvm", 1, {"nvidia_uvm"}},
      {"/dev/dri/card0", "drm", 0, {"nvidia_drm", "drm"}},
      {"/dev/dri/renderD128", "drm", 128, {"nvidia_drm", "drm"}},
  };
  return all;
}
const Registration& registration(std::string_view name) {
  for (const auto& r : kRegistrations) {
    if (r.name == name) return r;
  }
  throw std::logic_error("no registration " + std::string(name));
}

// The nodes devtmpfs makes when `module` loads (nvidia_drm's DRM nodes are on the DRM core's major).
std::vector<const Device*> nodes_of(std::string_view module) {
  std::vector<const Device*> out;
  for (const auto& d : devices()) {
    const std::string_view owner =
        d.registration == "drm" ? "nvidia_drm" : registration(d.registration).module;
    if (owner == module) out.push_back(&d);
  }
  return out;
}

// A character device node at `root` + `path`, as devtmpfs makes it.
void make_node(const std::string& root, std::string_view path, unsigned major, unsigned minor) {
  const fs::path p = root + std::string(path);
  fs::create_directories(p.parent_path());
  fs::remove(p);
  if (::mknod(p.c_str(), S_IFCHR | 0600, makedev(major, minor)) != 0)
    throw std::runtime_error("mknod " + p.string() + ": " + std::strerror(errno) + " (needs root)");
}

std::string make_temp_root() {
  std::string tmpl = (fs::temp_directory_path() / "dm-host-contract.XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return fs::canonical(tmpl).string();
}

// One private mount namespace for the process (a unit case is a process of its own): the driver root's
// mounts under the simulation root never reach the machine.
void enter_private_mount_namespace() {
  static bool done = false;
  if (done) return;
  if (::unshare(CLONE_NEWNS) != 0)
    throw std::runtime_error(std::string("unshare(CLONE_NEWNS): ") + std::strerror(errno) + " (needs root)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    throw std::runtime_error(std::string("making / private: ") + std::strerror(errno));
  done = true;
}

class SimScenario final : public HostScenario {
 public:
  SimScenario() {
    enter_private_mount_namespace();
    root_ = make_temp_root();
    fs::create_directories(root_ + "/sys/module");
    write_text(root_ + "/proc/self/cgroup", "0::/\n");  // this process: the root cgroup, as in the guest
    write_proc_files();
    host_ = host::make_host(root_);
  }
  ~SimScenario() override {
    release_processes_and_mounts();
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  [[nodiscard]] std::string name() const override { return "sim"; }
  host::Host& host() override { return *host_; }

  void load(const std::vector<std::string>& modules, const LoadOptions& options) override {
    for (const auto& m : modules) load_one(m, options);
    write_proc_files();
  }

  void rmmod(const std::string& module) override {
    if (auto st = host::make_sim_module_backend(root_)->remove(module); !st)
      throw std::runtime_error("rmmod " + module + ": " + st.error().message);
    write_proc_files();
  }

  [[nodiscard]] std::string proc_modules() override { return read_text(root_ + "/proc/modules"); }

  Holder start_holder(const std::string& comm, const std::vector<std::string>& paths,
                      const std::optional<PodCgroup>& pod) override {
    Holder h{next_pid_++, comm};
    std::vector<std::pair<int, std::string>> fds;
    std::vector<std::string> held;
    for (const auto& p : paths) {
      const Device& d = device(p);
      for (const auto m : d.holds) {
        if (!loaded(std::string(m)))
          throw std::runtime_error(fmt::format("{} cannot open {}: {} is not loaded (ENXIO)", comm, p, m));
        held.emplace_back(m);
      }
      fds.emplace_back(3 + static_cast<int>(fds.size()), p);
    }
    make_process(h.pid, comm, "0::/" + (pod ? pod->path : std::string()) + "\n", fds);
    for (const auto& m : held) add_references(m, 1);
    held_[h.pid] = std::move(held);
    write_proc_files();
    return h;
  }

  void stop_holder(const Holder& holder) override {
    fs::remove_all(root_ + "/proc/" + std::to_string(holder.pid));
    for (const auto& m : held_[holder.pid]) add_references(m, -1);
    held_.erase(holder.pid);
    write_proc_files();
  }

  void enter_pod(const PodCgroup& pod) override {
    write_text(root_ + "/proc/self/cgroup", "0::/" + pod.path + "\n");
  }

 private:
  [[nodiscard]] std::string dir(const std::string& module) const { return root_ + "/sys/module/" + module; }
  [[nodiscard]] bool loaded(const std::string& module) const { return fs::exists(dir(module) + "/refcnt"); }

  static const Device& device(const std::string& path) {
    for (const auto& d : devices()) {
      if (d.path == path) return d;
    }
    throw std::runtime_error("the simulation has no device " + path);
  }

  // DIR/proc/<pid> with its comm, cgroup and fd/<n> -> DIR<device> for each (n, device).
  void make_process(int pid, const std::string& comm, const std::string& cgroup,
                    const std::vector<std::pair<int, std::string>>& fds) {
    const std::string proc = root_ + "/proc/" + std::to_string(pid);
    fs::create_directories(proc + "/fd");
    write_text(proc + "/comm", comm + "\n");
    write_text(proc + "/cgroup", cgroup);
    for (const auto& [n, device] : fds) fs::create_symlink(root_ + device, proc + "/fd/" + std::to_string(n));
  }

  void add_references(const std::string& module, int delta) {
    const std::string file = dir(module) + "/refcnt";
    if (!fs::exists(file)) return;  // gone: what it held went with it
    const int refs = std::stoi(read_text(file)) + delta;
    write_text(file, std::to_string(refs) + "\n");
  }

  void load_one(const std::string& m, const LoadOptions& options) {
    if (loaded(m)) throw std::runtime_error("cannot load " + m + ": already loaded (EEXIST)");
    const auto deps = dependencies_of(m);
    for (const auto& d : deps) {
      if (!loaded(d))
        throw std::runtime_error(fmt::format("cannot load {}: it needs {} (Unknown symbol)", m, d));
    }
    fs::create_directories(dir(m) + "/holders");
    write_text(dir(m) + "/refcnt", "0\n");
    write_text(dir(m) + "/initstate", "live\n");
    for (const auto& d : deps) {
      fs::create_symlink("../../" + m, dir(d) + "/holders/" + m);
      add_references(d, 1);
    }
    // References without a holders link (released when the module exits): nvidia_vgpu_vfio's second one
    // on nvidia, nvidia_modeset's pins=N, and the DRM core's own file system, which drm keeps pinned while
    // a DRM device exists.
    if (m == "nvidia_vgpu_vfio") pin(m, "nvidia", 1);
    if (m == "nvidia_modeset") pin(m, "nvidia", options.modeset_pins);
    if (m == "nvidia_drm") pin(m, "drm", 1);
    if (m == "nvidia") frontend_ = options.frontend;
    if (m == "nvidia_peermem" && options.permanent_peermem) permanent_.insert(m);
    for (const Device* d : nodes_of(m)) {
      make_node(root_, d->path, registration(d->registration).major, d->minor);
    }
    if (m == "nvidia_drm") write_drm_sysfs(options.drm_on_gpu);
  }

  void pin(const std::string& holder, const std::string& target, int count) {
    if (count <= 0) return;
    write_text(dir(holder) + "/pins/" + target, std::to_string(count) + "\n");
    add_references(target, count);
  }

  // nvidia_drm's DRM nodes as sysfs links them: /sys/dev/char/226:<minor> -> the node's directory under its
  // parent device, whose driver/module names the module that drives the parent: the platform device
  // nvidia-drm.0 of nvidia_drm's own driver, or (on_gpu) nvidia's GPU device nvidia.0.
  void write_drm_sysfs(bool on_gpu) {
    const std::string sys = root_ + "/sys";
    const std::string parent = on_gpu ? "nvidia.0" : "nvidia-drm.0";
    const std::string driver = on_gpu ? "nvidia" : "nvidia-drm";
    const std::string device = sys + "/devices/platform/" + parent;
    const std::string drivers = sys + "/bus/platform/drivers/" + driver;
    // What an earlier nvidia_drm left: the kernel removes it when the module exits.
    for (const auto& gone : {sys + "/devices/platform", drivers, sys + "/dev/char"}) fs::remove_all(gone);
    fs::create_directories(drivers);
    fs::create_symlink("../../../../module/" + std::string(on_gpu ? "nvidia" : "nvidia_drm"),
                       drivers + "/module");
    fs::create_directories(device);
    fs::create_symlink("../../../bus/platform/drivers/" + driver, device + "/driver");
    fs::create_directories(sys + "/dev/char");
    for (const auto& [node, minor] : {std::pair<std::string, int>{"card0", 0}, {"renderD128", 128}}) {
      const std::string here = fmt::format("{}/drm/{}", device, node);
      fs::create_directories(here);
      write_text(here + "/dev", fmt::format("226:{}\n", minor));
      fs::create_symlink("../../../" + parent, here + "/device");
      fs::create_symlink(fmt::format("../../devices/platform/{}/drm/{}", parent, node),
                         fmt::format("{}/dev/char/226:{}", sys, minor));
    }
  }

  // /proc/modules and /proc/devices as the kernel writes them for what is loaded now.
  void write_proc_files() {
    std::string modules;
    for (const auto& e : fs::directory_iterator(root_ + "/sys/module")) {
      const std::string m = e.path().filename().string();
      if (!loaded(m)) continue;
      std::string used_by;
      std::set<std::string> holders;
      for (const auto& h : fs::directory_iterator(dir(m) + "/holders")) holders.insert(h.path().filename());
      for (const auto& h : holders) used_by += h + ",";
      if (permanent_.count(m) != 0) used_by += "[permanent],";
      if (used_by.empty()) used_by = "-";
      const std::string refs = std::to_string(std::stoi(read_text(dir(m) + "/refcnt")));
      modules += fmt::format("{} 16384 {} {} Live 0x0000000000000000{}\n", m, refs, used_by,
                             m == "drm" ? "" : " (OE)");
    }
    write_text(root_ + "/proc/modules", modules);

    std::map<unsigned, std::string> chr = {{1, "mem"}, {4, "/dev/vc/0"}, {5, "/dev/tty"}};
    for (const auto& r : kRegistrations) {
      if (!loaded(std::string(r.module))) continue;
      chr[r.major] = r.name == "nvidia" && frontend_ ? "nvidia-frontend" : std::string(r.name);
    }
    std::string text = "Character devices:\n";
    for (const auto& [major, name] : chr) text += fmt_major(major) + " " + name + "\n";
    text += "\nBlock devices:\n  8 sd\n";
    write_text(root_ + "/proc/devices", text);
  }

  static std::string fmt_major(unsigned major) {
    std::string s = std::to_string(major);
    return std::string(s.size() < 3 ? 3 - s.size() : 0, ' ') + s;
  }

  std::string root_;
  std::unique_ptr<host::Host> host_;
  bool frontend_ = false;
  std::set<std::string> permanent_;
  std::map<int, std::vector<std::string>> held_;
  int next_pid_ = 4001;
};

}  // namespace

std::unique_ptr<HostScenario> make_sim_scenario() {
  return std::make_unique<SimScenario>();
}

}  // namespace dm::test::host_contract
