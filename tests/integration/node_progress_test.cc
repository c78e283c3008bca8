// Progress where operators look, on a real control plane + node-sim: the node annotation
// nvidia.com/gpu-driver-manager.state seen by a watcher in each phase of a run and gone at its end (success,
// failure, SIGTERM), the Events of a run on the node, the progress lines of a wait on a pod that does not
// terminate, and the summary line that ends every run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kState = "nvidia.com/gpu-driver-manager.state";
constexpr const char* kLease = "nvidia.com/gpu-driver-manager.lease";

// Every version of the node's state and paused-labels annotations, as a `kubectl get --watch` sees them
// (a watch delivers each change of the object, so no phase is missed).
class NodeWatcher {
  // One line per version: "<state>|<paused-labels>".
  static constexpr const char* kTemplate =
      "jsonpath={.metadata.annotations.nvidia\\.com/gpu-driver-manager\\.state}|"
      "{.metadata.annotations.nvidia\\.com/gpu-driver-manager\\.paused-labels}{\"\\n\"}";

 public:
  NodeWatcher(const TestCluster& c, const std::string& node)
      : process_({test::kubectl_program(), "--kubeconfig", c.kubeconfig(), "get", "node", node, "--watch",
                  "-o", kTemplate},
                 make_temp_dir("dm-progress-watch") + "/watch.log") {
    // The watch is established once it printed the node as it is.
    if (!eventually([&] { return !lines().empty(); }, 30))
      throw std::runtime_error("watch: " + process_.log());
  }
  struct Version {
    std::string state;
    std::string paused;
  };
  [[nodiscard]] std::vector<Version> lines() const {
    std::vector<Version> out;
    std::istringstream in(process_.log());
    for (std::string line; std::getline(in, line);) {
      const auto bar = line.find('|');
      if (bar == std::string::npos) continue;
      out.push_back({line.substr(0, bar), line.substr(bar + 1)});
    }
    return out;
  }
  // The distinct phases the state annotation named, in order.
  [[nodiscard]] std::vector<std::string> phases() const {
    std::vector<std::string> out;
    static const std::regex kPhase("^phase=([a-z-]+); ");
    for (const auto& v : lines()) {
      std::smatch m;
      if (!std::regex_search(v.state, m, kPhase)) continue;
      if (out.empty() || out.back() != m[1].str()) out.push_back(m[1].str());
    }
    return out;
  }
  [[nodiscard]] bool saw(const std::string& text) const {
    const auto ls = lines();
    return std::any_of(ls.begin(), ls.end(),
                       [&](const Version& v) { return v.state.find(text) != std::string::npos; });
  }

 private:
  BackgroundProcess process_;
};

class Progress : public UninstallSuite {
 protected:
  struct Event {
    std::string type;
    std::string reason;
    std::string message;
  };
  // The Events recorded on the node, oldest first.
  static std::vector<Event> node_events(const Scenario& s) {
    const auto list = cluster().get_json(
        {"events", "-n", "default", "--field-selector", "involvedObject.name=" + s.node()});
    std::vector<json> items = list["items"].get<std::vector<json>>();
    std::sort(items.begin(), items.end(), [](const json& a, const json& b) {
      return a["metadata"].value("creationTimestamp", "") < b["metadata"].value("creationTimestamp", "");
    });
    std::vector<Event> out;
    out.reserve(items.size());
    for (const auto& e : items)
      out.push_back({e.value("type", ""), e.value("reason", ""), e.value("message", "")});
    return out;
  }
  static std::vector<std::string> reasons(const std::vector<Event>& events) {
    std::vector<std::string> out;
    out.reserve(events.size());
    for (const auto& e : events) out.push_back(e.type + " " + e.reason);
    return out;
  }
  static std::string last_line(const std::string& log) {
    std::string last;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) last = line;
    }
    return last;
  }
  static std::unique_ptr<BackgroundProcess> start(const Scenario& s, const std::string& name,
                                                  const std::map<std::string, std::string>& extra) {
    return std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin_path("driver-manager"), "uninstall_driver"},
        cluster().state_dir() + "/" + name + ".log", s.env(sa_kubeconfig(), extra));
  }
  static void deploy_annotated_client(const Scenario& s, const std::string& name) {
    cluster().apply("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name +
                    "\n  namespace: " + s.workload_ns() +
                    "\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: " + name +
                    "\n  template:\n    metadata:\n      labels:\n        app: " + name +
                    "\n      annotations:\n        nvidia.com/gpu.client: \"true\"\n"
                    "        node-sim/terminate-after-seconds: \"0.5\"\n"
                    "    spec:\n      terminationGracePeriodSeconds: 5\n      nodeSelector:\n        " +
                    std::string(kNodeLabel) + ": " + s.node() +
                    "\n      containers:\n      - name: main\n        image: example.com/gpu-agent:1\n");
  }
};

// A full run: the watcher sees the first phase written together with the operand-label pause (no request
// of its own) - the unload's and the restore's have no wait or write of their own to ride along with, and
// the write that ends the run removes the state - and no state once the run is over; the only Event is the
// summary of what the run did, which also times each phase. The GPU workload is evicted inside pause-operands
// (beside the operand wait and the client reset): with no drain and no DRA there is no evict-workloads phase,
// and the summary still counts the evicted GPU pod apart.
TEST_F(Progress, AFullRunShowsEachPhaseOnTheNodeAndEndsWithTheSummary) {
  Scenario s(cluster(), "prog-full");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  deploy_annotated_client(s, "agent");
  s.deploy_gpu_workload("train");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);
  NodeWatcher watch(cluster(), s.node());

  auto r = s.run(sa_kubeconfig());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  ASSERT_TRUE(eventually([&] { return !s.has_annotation(kState); }, 5));
  EXPECT_FALSE(s.has_annotation(kLease));
  EXPECT_TRUE(eventually([&] { return watch.lines().back().state.empty(); }, 10))
      << "the watch saw the removal";
  EXPECT_EQ(watch.phases(), (std::vector<std::string>{"pause-operands"})) << r.log;
  // Each value names its phase, when it began and when the run began.
  for (const auto& v : watch.lines()) {
    if (v.state.empty()) continue;
    EXPECT_THAT(v.state,
                ContainsRegex("^phase=[a-z-]+; since=20[0-9-]+T[0-9:]+Z; run started=20[0-9-]+T[0-9:]+Z$"));
  }
  const auto ls = watch.lines();
  const auto first = std::find_if(ls.begin(), ls.end(), [](const auto& v) { return !v.state.empty(); });
  ASSERT_NE(first, ls.end());
  EXPECT_THAT(first->state, StartsWith("phase=pause-operands;"));
  EXPECT_FALSE(first->paused.empty()) << "the first state rides along with the pause patch";

  const auto events = node_events(s);
  EXPECT_THAT(reasons(events), ElementsAre("Normal NodePreparedForDriver"));

  // The last line: 4 operand labels paused, their 4 pods stopped, 1 client reset, 1 GPU workload evicted, the
  // 3 simulated modules unloaded, and each phase with its duration.
  const std::string last = last_line(r.log);
  EXPECT_THAT(last,
              ContainsRegex("Summary: node prepared for the driver installation in [0-9m.]+s: paused 4 "
                            "operand labels, stopped 4 operand pods, reset 1 GPU client, evicted 1 GPU pod, "
                            "unloaded 3 kernel modules; phases: pause-operands [0-9.]+s, unload-driver "
                            "[0-9.]+s, restore [0-9.]+s$"))
      << r.log;
  const auto prepared = std::find_if(events.begin(), events.end(),
                                     [](const Event& e) { return e.reason == "NodePreparedForDriver"; });
  ASSERT_NE(prepared, events.end());
  EXPECT_THAT(prepared->message, HasSubstr("Summary: node prepared for the driver installation"));
  // `kubectl describe node` lists them (it looks for Events by the node name as UID, as the kubelet writes).
  EXPECT_THAT(
      kubectl_ok(cluster(), {"describe", "node", s.node()}),
      ContainsRegex("Normal +NodePreparedForDriver +[0-9a-z]+ +driver-manager +driver-manager: Summary:"));
}

// An operand pod that never finishes terminating holds the operand wait until its deadline: every 5 s the
// progress line names the pod and the counts; once the wait has lasted 15 s the state annotation names it
// too, with the lease's next renewal (at most 15 s later). The failed run removes its state, and says in its
// last line where it failed.
TEST_F(Progress, AStuckPodIsNamedInTheProgressLinesAndTheStateAndAFailedRunRemovesTheState) {
  Scenario s(cluster(), "prog-stuck");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());
  const auto stuck = s.pods_in(s.operator_ns(), "app=nvidia-dcgm");
  ASSERT_EQ(stuck.size(), 1U);
  const std::string stuck_ref = s.operator_ns() + "/" + stuck.front()["metadata"].value("name", "");
  NodeWatcher watch(cluster(), s.node());

  auto dm = start(s, "prog-stuck", {{"OPERAND_WAIT_TIMEOUT", "40s"}});
  // What an operator sees meanwhile: the state with the pod.
  std::string described;
  EXPECT_TRUE(eventually(
      [&] {
        described = kubectl_ok(cluster(), {"describe", "node", s.node()});
        return described.find("waiting for 1 of") != std::string::npos;
      },
      40))
      << described;
  // A long value goes on the line after its key.
  EXPECT_THAT(described,
              ContainsRegex("nvidia.com/gpu-driver-manager.state:\\s+phase=pause-operands; since="));
  EXPECT_THAT(described, HasSubstr("waiting for 1 of " + std::to_string(ops.size()) + " pods: " + stuck_ref));
  const DmRun r{dm->wait(60), dm->log()};

  ASSERT_EQ(r.exit_code, 1) << r.log;
  // Progress lines: the stuck pod by name, how many are left of how many, elapsed and remaining time.
  const std::regex line("Still waiting for GPU operand pods to shut down: 1 of ([0-9]+) left: " + stuck_ref +
                        " \\([^\n]*\\) \\(elapsed ([0-9]+)s, ([0-9]+)s left\\)");
  std::vector<int> elapsed;
  for (auto it = std::sregex_iterator(r.log.begin(), r.log.end(), line); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(std::stoi((*it)[1].str()), static_cast<int>(ops.size())) << "of all the operand pods";
    elapsed.push_back(std::stoi((*it)[2].str()));
  }
  EXPECT_GE(elapsed.size(), 3U) << r.log;
  EXPECT_TRUE(std::is_sorted(elapsed.begin(), elapsed.end()));
  // The state during the wait, and during the cleanup.
  EXPECT_TRUE(watch.saw("phase=pause-operands;")) << r.log;
  EXPECT_TRUE(watch.saw("; waiting for 1 of " + std::to_string(ops.size()) + " pods: " + stuck_ref + ";"))
      << r.log;
  EXPECT_EQ(watch.phases(), (std::vector<std::string>{"pause-operands", "cleanup-on-failure"}));
  EXPECT_FALSE(s.has_annotation(kState));
  EXPECT_FALSE(s.has_annotation(kLease));
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;

  EXPECT_THAT(reasons(node_events(s)), ElementsAre("Warning DriverUninstallFailed"));
  EXPECT_THAT(
      last_line(r.log),
      ContainsRegex("Summary: failed in phase pause-operands in [0-9.]+s: paused 5 operand labels, stopped 4 "
                    "operand pods; phases: pause-operands [0-9.]+s, cleanup-on-failure [0-9.]+s$"))
      << r.log;
}

// SIGTERM during the operand wait: the node is restored, the state and the lease go with it, and the last
// line says the run was terminated and where.
TEST_F(Progress, SigtermRemovesTheStateAndTheSummarySaysWhere) {
  Scenario s(cluster(), "prog-term");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  auto dm = start(s, "prog-term", {{"OPERAND_WAIT_TIMEOUT", "300s"}});
  ASSERT_TRUE(eventually(
      [&] { return dm->log().find("Still waiting for GPU operand pods") != std::string::npos; }, 60))
      << dm->log();
  ASSERT_TRUE(s.has_annotation(kState));
  dm->signal(SIGTERM);
  const int code = dm->wait(60);
  const std::string log = dm->log();

  EXPECT_EQ(code, 143) << log;
  EXPECT_FALSE(s.has_annotation(kState));
  EXPECT_FALSE(s.has_annotation(kLease));
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
  EXPECT_THAT(last_line(log),
              ContainsRegex("Summary: terminated by SIGTERM in phase pause-operands in [0-9.]+s: "
                            "paused 5 operand labels, stopped 4 operand pods; phases: "
                            "pause-operands [0-9.]+s, cleanup-on-failure [0-9.]+s$"))
      << log;
}

}  // namespace
}  // namespace dm::test::uninstall
