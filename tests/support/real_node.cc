#include "support/real_node.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace dm::test {
namespace {

std::string chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// /proc/<pid>/mountinfo escapes spaces, tabs, newlines and backslashes as \ooo.
std::string unescape_mountinfo(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

RealNode::RealNode(const TestCluster& cluster, std::string node, std::string sim_root,
                   const std::map<std::string, std::string>& env)
    : node_(std::move(node)), sim_root_(std::move(sim_root)) {
  if (sim_root_.empty()) {
    sim_root_ = make_temp_dir("real-node-" + node_);
    owns_sim_root_ = true;
  }
  std::map<std::string, std::string> e = env;
  if (e.count("NODE_SIM_BIN") == 0) e["NODE_SIM_BIN"] = bin_path("node-sim");
  // The node goes down by itself if this test process dies without running the destructor.
  e["NODE_WATCH_PID"] = std::to_string(::getpid());
  auto out = run_command({source_path("scripts/node"), "up", cluster.kubeconfig(), node_, sim_root_}, {}, e);
  if (out.exit_code != 0) {
    if (owns_sim_root_) {
      std::error_code ec;
      std::filesystem::remove_all(sim_root_, ec);
    }
    throw std::runtime_error("scripts/node up failed (" + std::to_string(out.exit_code) + "):\n" + out.err);
  }
  state_dir_ = chomp(out.out);
  std::istringstream in(read_file(state_dir_ + "/env"));
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env_[line.substr(0, eq)] = line.substr(eq + 1);
  }
}

RealNode::~RealNode() {
  if (!down_) down();
  if (owns_sim_root_) {
    std::error_code ec;
    std::filesystem::remove_all(sim_root_, ec);
  }
}

CommandOutput RealNode::down() {
  down_ = true;
  return run_command({source_path("scripts/node"), "down", state_dir_});
}

std::string RealNode::env(const std::string& key) const {
  auto it = env_.find(key);
  return it == env_.end() ? std::string() : it->second;
}

std::optional<int> RealNode::refcnt(const std::string& module) const {
  const std::string path = sim_root_ + "/sys/module/" + module + "/refcnt";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const std::string s = read_file(path);
  if (s.empty()) return std::nullopt;  // removed while reading
  return std::stoi(s);
}

std::vector<std::string> RealNode::mounts_at(const std::string& path) const {
  std::vector<std::string> types;
  std::istringstream in(read_file("/proc/" + env("NODE_MNTNS_PID") + "/mountinfo"));
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options [optional fields] - fstype source super-options
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    f >> id >> parent >> dev >> root >> point;
    if (unescape_mountinfo(point) != path) continue;
    std::string tok;
    while (f >> tok && tok != "-") {
    }
    std::string fstype;
    f >> fstype;
    types.push_back(fstype);
  }
  return types;
}

std::optional<std::string> RealNode::read_in_node(const std::string& path) const {
  const std::string p = "/proc/" + env("NODE_MNTNS_PID") + "/root" + path;
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::nullopt;
  return read_file(p);
}

std::optional<pid_t> RealNode::container_pid(const std::string& container_id) const {
  const std::string prefix = "containerd://";
  if (container_id.rfind(prefix, 0) != 0) return std::nullopt;
  // The runc shim records the container's init process in its bundle directory.
  const std::string path = env("NODE_CONTAINERD_STATE") + "/io.containerd.runtime.v2.task/k8s.io/" +
                           container_id.substr(prefix.size()) + "/init.pid";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  const std::string s = chomp(read_file(path));
  if (s.empty()) return std::nullopt;
  return static_cast<pid_t>(std::stol(s));
}

std::string RealNode::kubelet_log() const {
  return read_file(state_dir_ + "/logs/kubelet.log");
}
std::string RealNode::node_sim_log() const {
  return read_file(state_dir_ + "/logs/node-sim.log");
}

std::string RealNode::logs_tail(size_t lines) const {
  std::string out;
  for (const char* name : {"containerd", "kubelet", "node-sim"}) {
    auto r = run_command({"tail", "-n", std::to_string(lines), state_dir_ + "/logs/" + name + ".log"});
    out += std::string("--- ") + name + " (last " + std::to_string(lines) + " lines)\n" + r.out;
  }
  return out;
}

}  // namespace dm::test
