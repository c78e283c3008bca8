// The real kernel as a host contract scenario, inside the test guest (tests/kernel/guest): the stub modules
// of tests/kernel/modules loaded from /lib/modules/stub with finit_module(2), real child processes opening
// the real device nodes (devtmpfs), real cgroup2 directories, real mounts. Teardown kills the holders,
// unmounts, removes the cgroups and every stub module, so that the next case starts from a clean kernel.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "host/process.h"
#include "support/host_scenario.h"

namespace dm::test::host_contract {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kStubDir = "/lib/modules/stub";
constexpr std::string_view kCgroupRoot = "/sys/fs/cgroup";

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

bool is_stub(std::string_view name) {
  return std::find(std::begin(kStubModules), std::end(kStubModules), name) != std::end(kStubModules);
}

std::vector<std::string> loaded_stubs() {
  std::vector<std::string> out;
  for (auto& m : module_names(read_text("/proc/modules"))) {
    if (is_stub(m)) out.push_back(std::move(m));
  }
  return out;
}

// Removes every stub module that can be removed, holders first (a pass removes what nothing holds).
void remove_stubs() {
  for (size_t pass = 0; pass <= std::size(kStubModules); ++pass) {
    const auto left = loaded_stubs();
    bool progress = false;
    for (const auto& m : left)
      progress = ::syscall(SYS_delete_module, m.c_str(), O_NONBLOCK) == 0 || progress;
    if (!progress) return;
  }
}

// Writes this process (or, from a child, that child) into the cgroup directory `dir`.
std::string join_cgroup(const std::string& dir) {
  const std::string procs = dir + "/cgroup.procs";
  const int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno_text("open " + procs);
  const bool written = ::write(fd, "0", 1) == 1;
  std::string problem = written ? std::string() : errno_text("write " + procs);
  ::close(fd);
  return problem;
}

class KernelScenario final : public HostScenario {
 public:
  KernelScenario() {
    if (!fs::exists(std::string(kStubDir) + "/nvidia.ko"))
      throw std::runtime_error(
          std::string("the kernel scenario runs only inside the test guest (tests/kernel/guest run): ") +
          std::string(kStubDir) + "/nvidia.ko is not there");
    remove_stubs();
    if (const auto left = loaded_stubs(); !left.empty()) {
      std::string names;
      for (const auto& m : left) names += " " + m;
      throw std::runtime_error(
          "stub module(s) still loaded from an earlier case:" + names +
          " (a [permanent] module can never be unloaded: the case that loads it runs last)");
    }
    host_ = host::make_host("");
  }

  ~KernelScenario() override {
    release_processes_and_mounts();
    if (in_pod_) (void)join_cgroup(std::string(kCgroupRoot));
    for (auto it = cgroups_.rbegin(); it != cgroups_.rend(); ++it) {
      if (::rmdir(it->c_str()) != 0) std::cerr << errno_text("kernel scenario: rmdir " + *it) << "\n";
    }
    remove_stubs();
    if (const auto left = loaded_stubs(); !left.empty()) {
      std::cerr << "kernel scenario: still loaded after the case:";
      for (const auto& m : left) std::cerr << " " << m;
      std::cerr << "\n";
    }
  }

  [[nodiscard]] std::string name() const override { return "kernel"; }
  host::Host& host() override { return *host_; }

  void load(const std::vector<std::string>& modules, const LoadOptions& options) override {
    for (const auto& m : modules) {
      if (m == "drm") {
        const auto r = host::run_process({"modprobe", "drm"});
        if (r.exit_code != 0)
          throw std::runtime_error("modprobe drm: exit " + std::to_string(r.exit_code) + ": " + r.output);
        continue;
      }
      const bool permanent = m == "nvidia_peermem" && options.permanent_peermem;
      const std::string file = std::string(kStubDir) + (permanent ? "/permanent/" : "/") + m + ".ko";
      std::string params;
      if (m == "nvidia" && options.frontend) params = "frontend=1";
      if (m == "nvidia_modeset" && options.modeset_pins > 0)
        params = "pins=" + std::to_string(options.modeset_pins);
      if (m == "nvidia_drm" && options.drm_on_gpu) params = "gpu_parent=1";
      const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw std::runtime_error(errno_text("open " + file));
      const long r = ::syscall(SYS_finit_module, fd, params.c_str(), 0);
      const int err = errno;
      ::close(fd);
      if (r != 0) {
        errno = err;
        throw std::runtime_error(errno_text(fmt::format("finit_module {} {}", file, params)));
      }
    }
  }

  void rmmod(const std::string& module) override {
    if (::syscall(SYS_delete_module, module.c_str(), O_NONBLOCK) != 0)
      throw std::runtime_error(errno_text("delete_module " + module));
  }

  [[nodiscard]] std::string proc_modules() override { return read_text("/proc/modules"); }

  Holder start_holder(const std::string& comm, const std::vector<std::string>& paths,
                      const std::optional<PodCgroup>& pod) override {
    const std::string cgroup = pod ? make_cgroup(pod->path) : std::string();
    const pid_t pid = start_child(comm, [&]() -> std::string {
      if (!cgroup.empty()) {
        if (auto problem = join_cgroup(cgroup); !problem.empty()) return problem;
      }
      if (::prctl(PR_SET_NAME, comm.c_str()) != 0) return errno_text("prctl(PR_SET_NAME)");
      for (const auto& p : paths) {
        if (::open(p.c_str(), O_RDWR) < 0) return errno_text("open " + p);
      }
      return {};
    });
    return {pid, comm.substr(0, 15)};  // the kernel keeps 15 characters of a task's name
  }

  void stop_holder(const Holder& holder) override { kill_child(holder.pid); }

  void enter_pod(const PodCgroup& pod) override {
    const std::string dir = make_cgroup(pod.path);
    if (auto problem = join_cgroup(dir); !problem.empty()) throw std::runtime_error(problem);
    in_pod_ = true;
  }

 private:
  // mkdir -p under the cgroup2 root, remembering what it made (removed deepest first at teardown).
  std::string make_cgroup(const std::string& path) {
    std::string dir(kCgroupRoot);
    for (const auto& part : fs::path(path)) {
      dir += "/" + part.string();
      if (fs::exists(dir)) continue;
      if (::mkdir(dir.c_str(), 0755) != 0) throw std::runtime_error(errno_text("mkdir " + dir));
      cgroups_.push_back(dir);
    }
    return dir;
  }

  std::unique_ptr<host::Host> host_;
  std::vector<std::string> cgroups_;
  bool in_pod_ = false;
};

}  // namespace

std::unique_ptr<HostScenario> make_kernel_scenario() {
  return std::make_unique<KernelScenario>();
}

}  // namespace dm::test::host_contract
