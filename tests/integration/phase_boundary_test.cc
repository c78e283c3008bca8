// uninstall_driver stopped at every phase boundary on a real control plane + node-sim, from one table:
// SIGTERM there must exit 143 with the node exactly as it was (labels, annotations, taints, schedulability,
// an admin's changes included); SIGKILL there must be healed by an immediate rerun of the same pod (driver
// unloaded, node as it was) or, for some points, by `driver-manager recover`.
//
// Each point is reached without hooks in the program: a pod of the phase is made slow to terminate (node-sim
// honours node-sim/terminate-after-seconds), or the run waits for a foreign lease or for MOFED, and the
// signal goes out when the program logs the phase's line. The restore itself is too quick to catch that way:
// there the API server is stopped while the run is held in the MOFED wait, so the restore's first request
// hangs in its retries when the signal arrives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;

enum class Heal { kSigterm, kRerun, kRecover };

const char* heal_name(Heal h) {
  switch (h) {
    case Heal::kSigterm:
      return "SIGTERM";
    case Heal::kRerun:
      return "SIGKILL, then a rerun";
    case Heal::kRecover:
      return "SIGKILL, then recover";
  }
  return "?";
}

// One phase boundary of uninstall_driver and how a test holds the run there.
struct Point {
  std::string name{};  // also the node's name prefix
  std::string slow{};  // "ns-kind/app" of the pod made slow to terminate ("op/<app>" or "wl/<app>"), or ""
  std::string line{};  // the program's log line that says the run is at the point ({node}: the node's name)
  bool foreign_lease = false;  // another run holds the node: the run waits for its lease
  bool mofed = false;          // the run waits for MOFED after the unload
  bool unloaded = false;       // the driver is already unloaded at this point
  // What a run killed at this point has left on the node (proves the kill landed inside the phase).
  std::function<void(Scenario&)> expect_left{};
};

constexpr double kHoldSeconds = 8;  // how long the phase's slow pod takes to terminate
constexpr int kLeaseSeconds = 20;   // the foreign lease's duration

std::string rfc3339_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

class PhaseBoundary : public UninstallSuite {
 protected:
  static std::vector<Operand> operands() {
    auto ops = default_operands();
    ops.push_back({"dra-driver", "nvidia-dra-driver-kubelet-plugin", true, false});  // DRA on: its drain
    return ops;
  }

  // A node with something for every phase to do: operands (DRA plugin included), an annotated DaemonSet
  // client, an annotated DRA-plugin client and a GPU workload, and an admin's label, operand label set to
  // "false", annotation and taint that no run may touch. Then the point's hold.
  static std::unique_ptr<Scenario> prepare(const Point& p, const std::string& node) {
    auto s = std::make_unique<Scenario>(cluster(), node);
    s->label_node({{"example.com/team", "ml"}, {deploy_label("sandbox-validator"), "false"}});
    s->annotate_node("example.com/maintenance-window", "sunday");
    kubectl_ok(cluster(), {"taint", "node", node, "example.com/maintenance=planned:PreferNoSchedule"});
    const auto ops = operands();
    s->deploy_operands(ops);
    s->deploy_client(
        {.name = "node-agent", .kind = "DaemonSet", .terminate_after = "0.3", .grace_period_seconds = 5});
    s->deploy_client({.name = "dra-agent",
                      .kind = "DaemonSet",
                      .dra_plugin = true,
                      .terminate_after = "0.3",
                      .grace_period_seconds = 5});
    s->deploy_gpu_workload("train");
    // The driver pod the run is in (bound to no real node, nothing runs it): its grace period (60 s) is the
    // SIGTERM cleanup's budget, and the rerun, being the same pod, takes its lease over at once.
    cluster().apply("apiVersion: v1\nkind: Pod\nmetadata:\n  name: driver-" + node +
                    "\n  namespace: " + s->operator_ns() + "\nspec:\n  nodeName: no-such-node-" + node +
                    "\n  terminationGracePeriodSeconds: 60\n  tolerations:\n  - operator: Exists\n"
                    "  containers:\n  - name: k8s-driver-manager\n    image: example.com/driver-manager:1\n");
    s->wait_running(s->operator_ns(), ops.size());
    s->wait_running(s->workload_ns(), 3);
    if (!p.slow.empty()) {
      const auto slash = p.slow.find('/');
      const std::string ns = p.slow.substr(0, slash) == "op" ? s->operator_ns() : s->workload_ns();
      kubectl_ok(cluster(),
                 {"-n", ns, "annotate", "pods", "-l", "app=" + p.slow.substr(slash + 1), "--overwrite",
                  "node-sim/terminate-after-seconds=" + std::to_string(kHoldSeconds)});
    }
    if (p.mofed) {
      const std::string dev = s->sim_path("/sys/bus/pci/devices/0000:3b:00.0");
      std::filesystem::create_directories(dev);
      write_file(dev + "/vendor", "0x15b3\n");
      write_file(dev + "/device", "0x101b\n");
      write_file(dev + "/class", "0x020000\n");
    }
    if (p.foreign_lease) {
      const json lease = {{"holder", "pod gpu-operator/nvidia-driver-daemonset-other"},
                          {"renewTime", rfc3339_now()},
                          {"leaseDurationSeconds", kLeaseSeconds}};
      s->annotate_node(kLeaseAnnotation, lease.dump());
    }
    return s;
  }

  static std::map<std::string, std::string> run_env(const Scenario& s, const Point& p) {
    std::map<std::string, std::string> e = {{"POD_NAME", "driver-" + s.node()},
                                            {"POD_NAMESPACE", s.operator_ns()}};
    if (p.mofed) e["GPU_DIRECT_RDMA_ENABLED"] = "true";
    return e;
  }

  static void release_mofed(const Scenario& s) {
    std::filesystem::create_directories(s.sim_path("/run/mellanox/drivers"));
    write_file(s.sim_path("/run/mellanox/drivers/.driver-ready"), "");
  }

  // The node as it was before the run, field by field.
  static void expect_state(const Scenario& s, const NodeState& want) {
    const NodeState got = s.state();
    EXPECT_EQ(got.labels, want.labels);
    EXPECT_EQ(got.annotations, want.annotations);
    EXPECT_EQ(got.taints, want.taints);
    EXPECT_EQ(got.unschedulable, want.unschedulable);
  }

  // A killed run's leftovers healed: by a rerun of the same pod (which must also unload the driver) or by
  // recover (which leaves the driver as it is).
  static void heal_after_kill(Scenario& s, const Point& p, Heal heal, NodeState before) {
    if (p.foreign_lease) before.annotations.erase(kLeaseAnnotation);  // lapsed and taken over
    if (p.mofed) release_mofed(s);  // MOFED is installed by now (the rerun waits for it too)
    if (heal == Heal::kRecover) {
      auto r = s.recover(sa_kubeconfig(), /*force=*/true);  // the killed run's lease is still live
      EXPECT_EQ(r.exit_code, 0) << r.log;
      EXPECT_THAT(r.log, HasSubstr("Recovered node " + s.node()));
      EXPECT_EQ(s.sim().refcnt().has_value(), !p.unloaded) << "recover leaves the driver as it is";
      expect_state(s, before);
      return;
    }
    auto r = s.run(sa_kubeconfig(), run_env(s, p));
    EXPECT_EQ(r.exit_code, 0) << r.log;
    if (p.foreign_lease) {
      EXPECT_THAT(r.log, HasSubstr("expired"));
    } else {
      EXPECT_THAT(r.log, HasSubstr("Taking over the lease on node " + s.node()));
    }
    EXPECT_FALSE(s.sim().refcnt().has_value()) << "the rerun unloads the driver";
    expect_state(s, before);
  }

  // One point, one way out: the whole scenario from a fresh node to the assertions.
  static void exercise(const Point& p, Heal heal) {
    SCOPED_TRACE(p.name + ", " + heal_name(heal));
    const char suffix = heal == Heal::kSigterm ? 't' : heal == Heal::kRerun ? 'k' : 'r';
    auto sp = prepare(p, "pb-" + p.name + "-" + suffix);
    Scenario& s = *sp;
    const NodeState before = s.state();
    auto dm = s.start(sa_kubeconfig(), cluster().state_dir() + "/" + s.node() + ".log", run_env(s, p));
    std::string line = p.line;
    if (const auto at = line.find("{node}"); at != std::string::npos) line.replace(at, 6, s.node());
    ASSERT_TRUE(wait_for_log(*dm, line, 120)) << line << "\n" << dm->log();

    if (heal == Heal::kSigterm) {
      dm->signal(SIGTERM);
      const int code = dm->wait(90);
      EXPECT_EQ(code, 143) << dm->log();
      expect_state(s, before);
      EXPECT_EQ(s.sim().refcnt().has_value(), !p.unloaded) << dm->log();
      return;
    }
    dm->signal(SIGKILL);
    EXPECT_EQ(dm->wait(30), 128 + SIGKILL);
    if (p.expect_left) p.expect_left(s);
    heal_after_kill(s, p, heal, before);
  }

  // Runs `jobs` on a few threads (each scenario mostly waits on pods and the API server; a few at a time
  // keep the wall time down without starving the control plane). An exception fails the test.
  static void run_parallel(const std::vector<std::function<void()>>& jobs, size_t threads) {
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::vector<std::string> errors;
    std::vector<std::thread> pool;
    for (size_t t = 0; t < std::min(threads, jobs.size()); ++t) {
      pool.emplace_back([&] {
        for (size_t i = next++; i < jobs.size(); i = next++) {
          try {
            jobs[i]();
          } catch (const std::exception& e) {
            const std::lock_guard lock(mu);
            errors.emplace_back(e.what());
          }
        }
      });
    }
    for (auto& t : pool) t.join();
    for (const auto& e : errors) ADD_FAILURE() << e;
  }
};

std::vector<Point> phase_points() {
  return {
      // Before the first write: another run holds the node.
      {.name = "lease",
       .line = "Waiting for the run of driver-manager that holds node {node}",
       .foreign_lease = true,
       .expect_left = [](Scenario& s) { EXPECT_FALSE(s.has_annotation(kPausedLabelsAnnotation)); }},
      // Operand labels paused (and recorded), waiting for the operand pods to go.
      {.name = "operands",
       .slow = "op/nvidia-dcgm-exporter",
       .line = "Waiting for nvidia-dcgm-exporter to shutdown",
       .expect_left =
           [](Scenario& s) {
             EXPECT_EQ(s.label(deploy_label("dcgm-exporter")), kPausedValue);
             EXPECT_TRUE(s.has_annotation(kPausedLabelsAnnotation));
           }},
      // The gpu-client taint is on, the annotated client is being reset.
      {.name = "clients",
       .slow = "wl/node-agent",
       .line = "evicting pod wl-{node}/node-agent-",
       .expect_left = [](Scenario& s) { EXPECT_TRUE(s.has_annotation(kTaintedAnnotation)); }},
      // Cordoned, the GPU workload is being evicted.
      {.name = "workloads",
       .slow = "wl/train",
       .line = "evicting pod wl-{node}/train-",
       .expect_left =
           [](Scenario& s) {
             EXPECT_TRUE(s.unschedulable());
             EXPECT_TRUE(s.has_annotation(kCordonedAnnotation));
           }},
      // The third-party DRA plugin (annotated) is being reset after the workloads.
      {.name = "dra-clients",
       .slow = "wl/dra-agent",
       .line = "evicting pod wl-{node}/dra-agent-",
       .expect_left = [](Scenario& s) { EXPECT_TRUE(s.has_annotation(kCordonedAnnotation)); }},
      // The operator's DRA kubelet plugin is drained: the last step before the unload.
      {.name = "dra-plugin",
       .slow = "op/nvidia-dra-driver-kubelet-plugin",
       .line = "Waiting for dra-driver to shutdown",
       .expect_left = [](Scenario& s) { EXPECT_EQ(s.label(deploy_label("dra-driver")), kPausedValue); }},
      // The driver is unloaded, the node not yet restored (the MOFED wait comes first).
      {.name = "unloaded",
       .line = "Waiting for MOFED to be installed",
       .mofed = true,
       .unloaded = true,
       .expect_left =
           [](Scenario& s) {
             EXPECT_FALSE(s.sim().refcnt().has_value());
             EXPECT_TRUE(s.has_annotation(kTaintedAnnotation));
             EXPECT_TRUE(s.unschedulable());
           }},
  };
}

TEST_F(PhaseBoundary, SigtermRestoresAndSigkillIsHealedAtEveryPhase) {
  const auto points = phase_points();
  std::vector<std::function<void()>> jobs;
  for (const auto& p : points) {
    jobs.emplace_back([p] { exercise(p, Heal::kSigterm); });
    jobs.emplace_back([p] { exercise(p, Heal::kRerun); });
    if (p.name == "dra-plugin" || p.name == "unloaded")
      jobs.emplace_back([p] { exercise(p, Heal::kRecover); });
  }
  run_parallel(jobs, 4);
}

// During the restore (after the unload): the three runs are held in the MOFED wait, the API server is
// stopped, MOFED is released; once each run has started its restore and its first request is retrying, the
// signals go out and the API server comes back. One outage serves the three ways out.
TEST_F(PhaseBoundary, SigtermRestoresAndSigkillIsHealedDuringTheRestore) {
  const Point p{
      .name = "restore", .line = "Waiting for MOFED to be installed", .mofed = true, .unloaded = true};
  const std::vector<Heal> heals = {Heal::kSigterm, Heal::kRerun, Heal::kRecover};
  std::vector<std::unique_ptr<Scenario>> sc(heals.size());
  std::vector<std::function<void()>> setups;
  for (size_t i = 0; i < heals.size(); ++i) {
    setups.emplace_back([&, i] { sc[i] = prepare(p, std::string("pb-restore-") + "tkr"[i]); });
  }
  run_parallel(setups, heals.size());
  for (const auto& s : sc) ASSERT_NE(s, nullptr);
  std::vector<NodeState> before;
  std::vector<std::unique_ptr<BackgroundProcess>> dm;
  for (const auto& s : sc) {
    before.push_back(s->state());
    dm.push_back(s->start(sa_kubeconfig(), cluster().state_dir() + "/" + s->node() + ".log", run_env(*s, p)));
  }
  for (const auto& d : dm) ASSERT_TRUE(wait_for_log(*d, p.line, 120)) << d->log();

  cluster().stop_apiserver();
  for (const auto& s : sc) release_mofed(*s);
  for (size_t i = 0; i < heals.size(); ++i) {
    SCOPED_TRACE(heal_name(heals[i]));
    // Past the MOFED wait the next step is the restore; a retry warning after that says it is stuck.
    const bool in_restore = eventually(
        [&] {
          const std::string log = dm[i]->log();
          const auto ready = log.find("MOFED driver is ready");
          return ready != std::string::npos && log.find("retrying", ready) != std::string::npos;
        },
        60);
    if (!in_restore) cluster().start_apiserver();
    ASSERT_TRUE(in_restore) << dm[i]->log();
    // Nothing can have been restored with the API server down.
    dm[i]->signal(heals[i] == Heal::kSigterm ? SIGTERM : SIGKILL);
  }
  cluster().start_apiserver();

  std::vector<std::function<void()>> checks;
  for (size_t i = 0; i < heals.size(); ++i) {
    checks.emplace_back([&, i] {
      SCOPED_TRACE(heal_name(heals[i]));
      Scenario& s = *sc[i];
      if (heals[i] == Heal::kSigterm) {
        EXPECT_EQ(dm[i]->wait(120), 143) << dm[i]->log();
        EXPECT_THAT(dm[i]->log(), HasSubstr("Received SIGTERM: restoring the node before exiting"));
        SCOPED_TRACE(dm[i]->log());
        expect_state(s, before[i]);
        EXPECT_FALSE(s.sim().refcnt().has_value());
        return;
      }
      EXPECT_EQ(dm[i]->wait(30), 128 + SIGKILL);
      EXPECT_TRUE(s.has_annotation(kTaintedAnnotation)) << "killed before the restore got through";
      EXPECT_TRUE(s.unschedulable());
      heal_after_kill(s, p, heals[i], before[i]);
    });
  }
  run_parallel(checks, heals.size());
}

}  // namespace
}  // namespace dm::test::uninstall
