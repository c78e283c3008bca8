#include "support/node_sim.h"

#include <signal.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace dm::test {
namespace {

bool node_ready(const TestCluster& cluster, const std::string& node) {
  auto out = cluster.kubectl(
      {"get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"});
  return out.exit_code == 0 && out.out == "True";
}

}  // namespace

NodeSim::NodeSim(const TestCluster& cluster, std::string node, std::string sim_root, NodeSimOptions options)
    : node_(std::move(node)), sim_root_(std::move(sim_root)) {
  if (sim_root_.empty()) {
    sim_root_ = make_temp_dir("node-sim-" + node_);
    owns_sim_root_ = true;
  }
  std::vector<std::string> argv = {bin_path("node-sim"),
                                   "--kubeconfig",
                                   cluster.kubeconfig(),
                                   "--node",
                                   node_,
                                   "--sim-root",
                                   sim_root_,
                                   "--gpus",
                                   std::to_string(options.gpus)};
  if (options.no_driver) argv.emplace_back("--no-driver");
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  const std::string log_path = cluster.state_dir() + "/node-sim-" + node_ + ".log";
  process_ = std::make_unique<BackgroundProcess>(argv, log_path);
  // The Node may already be Ready from an earlier node-sim; wait for this one's "registered" line too.
  const bool ready = eventually(
      [&] {
        if (!process_->running()) return true;
        return log().find("node " + node_ + ": registered") != std::string::npos &&
               node_ready(cluster, node_) && (options.no_driver || refcnt("nvidia").has_value());
      },
      options.ready_timeout_s);
  if (!process_->running()) {
    throw std::runtime_error("node-sim for " + node_ + " exited early (code " +
                             std::to_string(process_->wait(1)) + "):\n" + log());
  }
  if (!ready) throw std::runtime_error("node-sim did not make node " + node_ + " Ready:\n" + log());
}

NodeSim::~NodeSim() {
  if (process_ && process_->running()) stop();
  if (owns_sim_root_) {
    std::error_code ec;
    std::filesystem::remove_all(sim_root_, ec);
  }
}

std::string NodeSim::module_dir(const std::string& module) const {
  return sim_root_ + "/sys/module/" + module;
}

std::optional<int> NodeSim::refcnt(const std::string& module) const {
  const std::string path = module_dir(module) + "/refcnt";
  if (!std::filesystem::exists(path)) return std::nullopt;
  const std::string s = read_file(path);
  if (s.empty() && !std::filesystem::exists(path)) return std::nullopt;  // removed while reading
  try {
    return std::stoi(s);
  } catch (const std::exception&) {
    throw std::runtime_error("unparsable refcnt in " + path + ": \"" + s + "\"");
  }
}

std::vector<std::string> NodeSim::users(const std::string& module) const {
  std::vector<std::string> out;
  std::istringstream in(read_file(module_dir(module) + "/users"));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::string NodeSim::log() const {
  return process_ ? process_->log() : std::string();
}

bool NodeSim::running() {
  return process_ && process_->running();
}

int NodeSim::stop(double timeout_s) {
  if (!process_) return exit_code_;
  if (process_->running()) process_->signal(SIGTERM);
  exit_code_ = process_->wait(timeout_s);
  if (exit_code_ == -1) {
    process_->signal(SIGKILL);
    process_->wait(5);
  }
  return exit_code_;
}

}  // namespace dm::test
