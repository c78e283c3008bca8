// A step of the run, alone: a host of the test's own that records what it is asked, the in-memory cluster
// for the node and its pods, a FakeClock, and the run's collaborators on node n1
// (tests/unit/env_steps_test.cc, tests/unit/run_steps_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "host/host.h"
#include "kube/api.h"
#include "manager/commands/step_env.h"
#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "manager/node/undo.h"
#include "manager/pods/drain.h"
#include "manager/pods/gpu_clients.h"
#include "manager/pods/pod_watch.h"
#include "manager/rules/settings.h"
#include "support/doubles.h"
#include "support/memory_cluster.h"

namespace dm::test {

using manager::DrainContext;
using manager::GpuClientReset;
using manager::NodeOps;
using manager::PodWatch;
using manager::Settings;
using manager::StepEnv;
using manager::TaintOps;
using manager::UndoList;

// A host that answers from its fields and records what it is asked to do.
class RecordingHost final : public host::Host {
 public:
  std::set<std::string> loaded;
  Status unload_nvidia = ok_status();
  std::deque<Status> unload_nvidia_answers;  // answered first, one per unload, before `unload_nvidia`
  std::vector<host::HolderProcess> holders;  // the processes holding the driver
  // When set, what each look at the holders finds instead of `holders` (processes that come and go).
  std::function<std::vector<host::HolderProcess>()> holders_now;
  // After each unload, the next holders (pods arriving to hold it again), until the queue is empty.
  std::deque<std::vector<host::HolderProcess>> holders_after_unload;
  Status unload_one = ok_status();
  Status unmount = ok_status();
  host::CommandResult command{.exit_code = 0, .output = ""};
  std::optional<std::string> mellanox;
  bool mofed = false;

  std::vector<std::string> calls;  // "unload-nvidia", "unload nouveau", "unmount", "remove-pid", "run ..."

  host::CommandResult run(const std::vector<std::string>& argv) override {
    std::string line = "run";
    for (const auto& a : argv) line += " " + a;
    calls.push_back(line);
    return command;
  }
  [[nodiscard]] std::string path(std::string_view host_path) const override { return std::string(host_path); }
  [[nodiscard]] bool module_loaded(std::string_view name) const override {
    return loaded.count(std::string(name)) > 0;
  }
  [[nodiscard]] Result<host::ModuleState> module_state(std::string_view name) const override {
    host::ModuleState state;
    state.name = std::string(name);
    state.loaded = module_loaded(name);
    return state;
  }
  [[nodiscard]] Status can_unload_nvidia() const override { return ok_status(); }
  Status unload_nvidia_modules() override {
    calls.emplace_back("unload-nvidia");
    if (!holders_after_unload.empty()) {
      holders = holders_after_unload.front();
      holders_after_unload.pop_front();
    }
    if (unload_nvidia_answers.empty()) return unload_nvidia;
    Status next = unload_nvidia_answers.front();
    unload_nvidia_answers.pop_front();
    return next;
  }
  [[nodiscard]] std::vector<host::HolderProcess> nvidia_holder_processes() const override {
    return holders_now ? holders_now() : holders;
  }
  [[nodiscard]] std::optional<std::string> own_pod_uid() const override { return std::nullopt; }
  [[nodiscard]] std::string nvidia_modules_table() const override { return ""; }
  Status unload_module(std::string_view name) override {
    calls.push_back("unload " + std::string(name));
    return unload_one;
  }
  Status unmount_driver_root() override {
    calls.emplace_back("unmount");
    return unmount;
  }
  void remove_pid_file() override { calls.emplace_back("remove-pid"); }
  [[nodiscard]] Result<std::optional<std::string>> read_driver_state() const override {
    return std::optional<std::string>();
  }
  std::optional<std::string> host_driver_version() override { return std::nullopt; }
  [[nodiscard]] std::optional<std::string> first_mellanox_device() const override { return mellanox; }
  [[nodiscard]] bool mofed_ready(host::Mofed /*mofed*/) const override { return mofed; }
};

// One step's environment: node n1 in the in-memory cluster, the run's writers, pod watch and client reset
// on it.
struct Bench {
  explicit Bench(CancelToken token = CancelToken())
      : cancel(std::move(token)),
        node(cluster, clock, cancel, "n1"),
        taint(cluster, clock, cancel, "n1"),
        pods(cluster, clock, "n1"),
        ctx{settings, cluster, clock, cancel, node, pods},
        clients(cluster, pods, clock, cancel, settings, undo, taint),
        env{ctx, host, clients} {
    settings.node_name = "n1";
    EXPECT_TRUE(cluster.create(kube::paths::nodes(),
                               {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}));
  }
  // The pod watch's first list, as the run takes it before any step.
  void watch_pods() { ASSERT_TRUE(pods.start(Deadline::none(), cancel)); }
  // A running pod of n1 in namespace "work" (the JSON of `spec` merged into its spec).
  void add_pod(const std::string& name, const nlohmann::json& spec = nlohmann::json::object()) {
    nlohmann::json pod = {{"apiVersion", "v1"},
                          {"kind", "Pod"},
                          {"metadata", {{"name", name}, {"namespace", "work"}}},
                          {"spec",
                           {{"nodeName", "n1"},
                            {"containers", nlohmann::json::array({{{"name", "main"}, {"image", "app:1"}}})}}},
                          {"status", {{"phase", "Running"}}}};
    pod["spec"].update(spec);
    cluster.apply(pod);
  }
  Settings settings;
  MemoryCluster cluster;
  FakeClock clock;
  CancelToken cancel;
  NodeOps node;
  TaintOps taint;
  PodWatch pods;
  DrainContext ctx;
  UndoList undo;
  GpuClientReset clients;
  RecordingHost host;
  StepEnv env;
  LogCapture log;
};

}  // namespace dm::test
