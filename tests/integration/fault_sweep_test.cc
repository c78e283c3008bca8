// The fault sweep: uninstall_driver on a real control plane + node-sim, stopped at every boundary it reports,
// on every path, by every fault, from tables.
//
// The boundaries of a path are generated from the program's own plan: `decide_steps(facts).phases()` for the
// facts the path's scenario gives the run (a phase added to the plan is swept without editing this file; the
// run logs "Phase <name>" at debug level when it enters one), plus the writes named below (the first write,
// the lease, the taint, the cordon, the label restore, the taint removal), each found by the line the run
// logs there. No hooks in the program: the test reads the run's log every 10 ms and stops the run (SIGSTOP)
// the moment the line is there, so the fault meets it at the boundary however quickly it would move on.
// Where the table knows how, the boundary's work is kept going meanwhile: a pod of the phase made slow to
// terminate (node-sim's node-sim/terminate-after-seconds), another run's lease, the MOFED wait.
//
// The faults:
//  * SIGKILL, then an immediate rerun of the same pod: the rerun completes; no GPU holder (client, workload,
//    operand) came back before the unload (node-sim's refcount never rises after the kill, but for pods the
//    run named as arrived late and evicted: see holder_came_back); the node is as it was (labels,
//    annotations, taints, schedulability, an admin's changes untouched).
//  * SIGTERM: exit 143 within the pod's grace period, the node as it was.
//  * The API server stopped for 15 s then started again, or frozen (SIGSTOP) for 15 s then let go: the run,
//    let go at its boundary as the outage begins, completes and leaves the node as it was. One outage per
//    fault serves every case of a path: all runs are brought to their boundaries (and stopped there) first.
//  * SIGKILL, then `driver-manager recover`: the node as it was, the driver as the kill left it.
//  * The API server overloaded for 30 s: API Priority and Fairness configured to turn every request of the
//    runs' service account away (429 Too Many Requests), then set back: the runs complete, the node as it
//    was, and at least one run met the 429s (its log says the server is overloaded).
//  * The API server stopped for 90 s (NinetySecondOutage: longer than the lease, at the first writes, in the
//    operand wait, and in the restore after a failure): the runs complete, the failed one restores the node.
//
// Each path prints a table boundary x fault -> outcome. By default the full path gets SIGKILL, SIGTERM and
// the API-server stop at every boundary (plus one freeze, two recovers and four overloads) and the other
// paths SIGKILL;
// DM_SWEEP_ALL=1 (bench/sweep) runs every fault on every path; DM_SWEEP_ONLY=a,b only those boundaries.
// BadNetwork: the node's link to the API server partitioned, slow and reset (a relay per fault).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "fixtures/uninstall/fixture.h"
#include "manager/commands/flow_steps.h"
#include "manager/commands/progress.h"
#include "support/tcp_relay.h"

namespace dm::test::uninstall {
namespace {

using manager::FlowFacts;
using manager::Phase;

enum class PathKind { kFull, kNoDriver, kSkip, kPolicy };

// A path of the run and the facts its scenario gives the run (prepare() builds the node to match).
struct PathSpec {
  std::string name;
  PathKind kind;
  FlowFacts facts;
  [[nodiscard]] bool unloads() const { return kind == PathKind::kFull || kind == PathKind::kPolicy; }
};

std::vector<PathSpec> sweep_paths() {
  // DRA on and GPUDirect RDMA on everywhere: every phase of the plan has something to do.
  return {
      {"full", PathKind::kFull,
       FlowFacts{.nvidia_loaded = true, .dra_on = true, .gpu_pod_eviction = true, .gpu_direct_rdma = true}},
      {"no-driver", PathKind::kNoDriver,
       FlowFacts{.dra_on = true, .gpu_pod_eviction = true, .gpu_direct_rdma = true}},
      {"skip", PathKind::kSkip,
       FlowFacts{.nvidia_loaded = true,
                 .skip = true,
                 .dra_on = true,
                 .gpu_pod_eviction = true,
                 .gpu_direct_rdma = true}},
      // The upgrade policy supersedes the eviction switches.
      {"policy-on", PathKind::kPolicy,
       FlowFacts{.nvidia_loaded = true, .dra_on = true, .gpu_direct_rdma = true}},
  };
}

enum class Hold {
  kNone,          // the fault goes out when the line is logged
  kSlowPod,       // a pod of the phase takes kHoldSeconds to terminate
  kForeignLease,  // another run holds the node
  kMofed,         // the run waits for MOFED (released for the rerun / when the outage begins)
};

struct Boundary {
  std::string name{};  // "pause-operands" (a phase), "cordon" (a write)
  std::string line{};  // what the run logs there ({node}: the node's name)
  Hold hold = Hold::kNone;
  std::string slow{};  // kSlowPod: "op/<app>" or "wl/<app>"
  bool tail = false;   // at or after the unload
  bool fails = false;  // the run is made to fail (its operand wait's deadline is shorter than the hold)
};

constexpr double kHoldSeconds = 8;
constexpr int kLeaseSeconds = 20;
constexpr int kGraceSeconds = 60;  // the driver pod's terminationGracePeriodSeconds
constexpr auto kOutage = std::chrono::seconds(15);
constexpr auto kLongOutage = std::chrono::seconds(90);
constexpr auto kOverloadFor = std::chrono::seconds(30);
constexpr const char* kOverloadName = "dm-test-overload";
constexpr const char* kOverloadLine = "The API server is overloaded and turning requests away";

// How the run is held inside a phase, by phase; a phase not listed here (a new one) is swept unheld.
Boundary phase_boundary(Phase p) {
  Boundary b{.name = std::string(manager::phase_name(p)),
             .line = "Phase " + std::string(manager::phase_name(p))};
  switch (p) {
    case Phase::kPauseOperands:
      b.hold = Hold::kSlowPod;
      b.slow = "op/nvidia-dcgm-exporter";
      break;
    case Phase::kEvictWorkloads:
    case Phase::kCleanDriverRoot:  // both end with the DRA kubelet plugin's drain
      b.hold = Hold::kSlowPod;
      b.slow = "op/nvidia-dra-driver-kubelet-plugin";
      break;
    case Phase::kWaitMofed:
      b.hold = Hold::kMofed;
      b.tail = true;
      break;
    default:          // the restore, and anything unheld
      b.tail = true;  // unheld: the run may be past it before the fault lands
      break;
  }
  return b;
}

// The boundaries of a path: the writes that precede the phases, the phases of the plan, the writes inside.
std::vector<Boundary> boundaries(const PathSpec& path) {
  std::vector<Boundary> out = {
      {.name = "first-write", .line = "Running in pod "},  // preflight's last line: the lease write is next
      {.name = "lease",
       .line = "Waiting for the run of driver-manager that holds node {node}",
       .hold = Hold::kForeignLease},
  };
  const auto phases = manager::decide_steps(path.facts).phases();
  for (Phase p : phases) out.push_back(phase_boundary(p));
  if (path.kind != PathKind::kNoDriver) {
    out.push_back({.name = "taint",
                   .line = "Tainting node {node} with",
                   .hold = Hold::kSlowPod,
                   .slow = "wl/node-agent"});
  }
  if (path.kind == PathKind::kFull) {
    out.push_back(
        {.name = "cordon", .line = "Cordoning node {node}", .hold = Hold::kSlowPod, .slow = "wl/train"});
  }
  out.push_back(
      {.name = "label-restore", .line = "Rescheduling all GPU clients on the current node", .tail = true});
  if (path.kind != PathKind::kNoDriver) {
    out.push_back({.name = "taint-removal", .line = "Removing taint", .tail = true});
  }
  return out;
}

// The link faults (BadNetwork) are not columns of the sweep's tables: they have a test of their own.
enum class Fault {
  kSigkill,
  kSigterm,
  kApiStop,
  kApiFreeze,
  kOverload,
  kRecover,
  kPartition,
  kSlowLink,
  kReset,
  kRollingRestart,
  kEtcdLeaderLost,
  kEtcdMemberLags,
  kRollingUpgrade
};
constexpr std::array kAllFaults = {Fault::kSigkill,   Fault::kSigterm,  Fault::kApiStop,
                                   Fault::kApiFreeze, Fault::kOverload, Fault::kRecover};

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kSigkill:
      return "SIGKILL+rerun";
    case Fault::kSigterm:
      return "SIGTERM";
    case Fault::kApiStop:
      return "API stop 15s";
    case Fault::kApiFreeze:
      return "API freeze 15s";
    case Fault::kOverload:
      return "API 429s 30s";
    case Fault::kRecover:
      return "SIGKILL+recover";
    case Fault::kPartition:
      return "link partitioned 45s";
    case Fault::kSlowLink:
      return "link 500ms + 10% 1s stalls, 60s";
    case Fault::kReset:
      return "connections reset at 2, 6, 12s";
    case Fault::kRollingRestart:
      return "API servers killed in turn, 15s each";
    case Fault::kEtcdLeaderLost:
      return "etcd leader killed 15s";
    case Fault::kEtcdMemberLags:
      return "etcd follower frozen 20s";
    case Fault::kRollingUpgrade:
      return "API servers at two releases, the older upgraded";
  }
  return "?";
}

bool sweep_all() {
  const char* v = std::getenv("DM_SWEEP_ALL");
  return v != nullptr && std::string(v) == "1";
}

// DM_SWEEP_ONLY=cordon,restore: only those boundaries (to look at one closely).
bool selected(const std::string& boundary) {
  const char* v = std::getenv("DM_SWEEP_ONLY");
  if (v == nullptr || *v == '\0') return true;
  return ("," + std::string(v) + ",").find("," + boundary + ",") != std::string::npos;
}

// ./scripts/test: the full path with SIGKILL, SIGTERM and the API-server stop at every boundary, one freeze
// (at the cordon), a recover where the old phase tests had one, and an overload at the first write, in the
// operand wait, at the cordon and at the taint removal; the other paths SIGKILL.
std::vector<Fault> faults_for(const PathSpec& path, const Boundary& b) {
  if (sweep_all()) return {kAllFaults.begin(), kAllFaults.end()};
  if (path.kind != PathKind::kFull) return {Fault::kSigkill};
  std::vector<Fault> f = {Fault::kSigkill, Fault::kSigterm, Fault::kApiStop};
  if (b.name == "cordon") f.push_back(Fault::kApiFreeze);
  if (b.name == "evict-workloads" || b.name == "wait-mofed") f.push_back(Fault::kRecover);
  if (b.name == "first-write" || b.name == "pause-operands" || b.name == "cordon" ||
      b.name == "taint-removal")
    f.push_back(Fault::kOverload);
  return f;
}

struct Outcome {
  bool ok = true;
  std::string text;
};

std::string rfc3339_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string tail_lines(const std::string& log, size_t n) {
  size_t at = log.size();
  for (size_t i = 0; i < n && at > 0; ++i) at = log.rfind('\n', at - 1);
  return at == std::string::npos ? log : log.substr(at);
}

// The first `level=fatal` (critical) line of a run's log: what it was doing when it gave up.
std::string gave_up_line(const std::string& log) {
  const auto at = log.find("level=fatal");
  if (at == std::string::npos) return {};
  const auto end = log.find('\n', at);
  return log.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// Polls the log every 10 ms (the fault should land close to the line) until it holds `text`.
bool wait_line(const BackgroundProcess& p, const std::string& text, double timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < until) {
    if (p.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A rise of node-sim's refcount after `from` in its log that brought a holder the run did not report as a pod
// that arrived late: a GPU holder came back (node-sim stops logging the refcount once the module is unloaded,
// so any rise is before the unload). After an API server restart the scheduler places pods from lagging
// caches for a few seconds, on the cordoned, tainted node too; such a pod starts and holds the GPU until the
// run's look for late arrivals evicts it. That one is named in `run_log` as "<ns>/<name> (GPU workload)" or
// "(GPU client)"; one bound after that look is found by the look at the host's holders before the unload,
// "<ns>/<name> (pid N (...)): found holding the GPU on the host, ...", and evicted: the run doing its job
// either way, not a holder let back in.
bool reported_late(const std::string& holder, const std::string& run_log) {
  if (run_log.find(holder + " (GPU ") != std::string::npos) return true;
  for (size_t at = run_log.find(holder + " (pid "); at != std::string::npos;
       at = run_log.find(holder + " (pid ", at + 1)) {
    const std::string line = run_log.substr(at, run_log.find('\n', at) - at);
    if (line.find("found holding the GPU on the host") != std::string::npos) return true;
  }
  return false;
}

std::string holder_came_back(const std::string& sim_log, size_t from, const std::string& run_log) {
  static const std::regex kLine(R"(refcnt (\d+) -> (\d+) \(holders: ([^)]*)\))");
  std::set<std::string> before;
  for (std::sregex_iterator it(sim_log.begin(), sim_log.end(), kLine), end; it != end; ++it) {
    std::set<std::string> now;  // "a, b" or "none"
    std::istringstream keys((*it)[3].str());
    for (std::string h; std::getline(keys >> std::ws, h, ',');) now.insert(h);
    if (static_cast<size_t>(it->position(0)) >= from && std::stoi((*it)[2]) > std::stoi((*it)[1])) {
      for (const auto& h : now) {
        if (!before.contains(h) && !reported_late(h, run_log))
          return (*it)[0].str() + ": " + h + " was not reported as arrived late";
      }
    }
    before = std::move(now);
  }
  return {};
}

class FaultSweep : public UninstallSuite {
 protected:
  static std::vector<Operand> operands() {
    auto ops = default_operands();
    ops.push_back({"dra-driver", "nvidia-dra-driver-kubelet-plugin", true, false});
    return ops;
  }

  // The node for one case: operands (the DRA plugin included), an annotated DaemonSet client, an annotated
  // DRA-plugin client, a GPU workload (not under the policy: the upgrade controller evicts those), an
  // admin's label, operand label at "false", annotation and taint that no run may touch; the path's facts;
  // the boundary's hold.
  static std::unique_ptr<Scenario> prepare(const PathSpec& path, const Boundary& b, const std::string& node) {
    NodeSimOptions sim;
    sim.no_driver = path.kind == PathKind::kNoDriver;
    auto s = std::make_unique<Scenario>(cluster(), node, sim);
    s->label_node({{"example.com/team", "ml"}, {deploy_label("sandbox-validator"), "false"}});
    s->annotate_node("example.com/maintenance-window", "sunday");
    kubectl_ok(cluster(), {"taint", "node", node, "example.com/maintenance=planned:PreferNoSchedule"});
    if (path.kind == PathKind::kPolicy) s->annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");
    if (path.kind == PathKind::kSkip)
      write_file(s->sim_path("/run/nvidia/nvidia-driver.state"), "digest-new\n");
    const auto ops = operands();
    s->deploy_operands(ops);
    s->deploy_client(
        {.name = "node-agent", .kind = "DaemonSet", .terminate_after = "0.3", .grace_period_seconds = 5});
    s->deploy_client({.name = "dra-agent",
                      .kind = "DaemonSet",
                      .dra_plugin = true,
                      .terminate_after = "0.3",
                      .grace_period_seconds = 5});
    size_t workload_pods = 2;
    if (path.kind != PathKind::kPolicy) {
      s->deploy_gpu_workload("train");
      ++workload_pods;
    }
    // The driver pod the run is in (bound to no real node): its grace period is the SIGTERM cleanup's
    // budget, and the rerun, being the same pod, takes its lease over at once.
    cluster().apply("apiVersion: v1\nkind: Pod\nmetadata:\n  name: driver-" + node +
                    "\n  namespace: " + s->operator_ns() + "\nspec:\n  nodeName: no-such-node-" + node +
                    "\n  terminationGracePeriodSeconds: " + std::to_string(kGraceSeconds) +
                    "\n  tolerations:\n  - operator: Exists\n"
                    "  containers:\n  - name: k8s-driver-manager\n    image: example.com/driver-manager:1\n");
    s->wait_running(s->operator_ns(), ops.size());
    s->wait_running(s->workload_ns(), workload_pods);
    if (b.hold == Hold::kSlowPod) {
      const auto slash = b.slow.find('/');
      const std::string ns = b.slow.substr(0, slash) == "op" ? s->operator_ns() : s->workload_ns();
      kubectl_ok(cluster(),
                 {"-n", ns, "annotate", "pods", "-l", "app=" + b.slow.substr(slash + 1), "--overwrite",
                  "node-sim/terminate-after-seconds=" + std::to_string(kHoldSeconds)});
    }
    // A Mellanox NIC: the MOFED wait holds the run until the ready file exists.
    const std::string dev = s->sim_path("/sys/bus/pci/devices/0000:3b:00.0");
    std::filesystem::create_directories(dev);
    write_file(dev + "/vendor", "0x15b3\n");
    write_file(dev + "/device", "0x101b\n");
    write_file(dev + "/class", "0x020000\n");
    if (b.hold != Hold::kMofed) release_mofed(*s);
    if (b.hold == Hold::kForeignLease) {
      const json lease = {{"holder", "pod gpu-operator/nvidia-driver-daemonset-other"},
                          {"renewTime", rfc3339_now()},
                          {"leaseDurationSeconds", kLeaseSeconds}};
      s->annotate_node(kLeaseAnnotation, lease.dump());
    }
    return s;
  }

  static void release_mofed(const Scenario& s) {
    std::filesystem::create_directories(s.sim_path("/run/mellanox/drivers"));
    write_file(s.sim_path("/run/mellanox/drivers/.driver-ready"), "");
  }

  static std::map<std::string, std::string> run_env(const Scenario& s, bool fails = false) {
    return {{"POD_NAME", "driver-" + s.node()},
            {"POD_NAMESPACE", s.operator_ns()},
            {"GPU_DIRECT_RDMA_ENABLED", "true"},
            {"LOG_LEVEL", "debug"},  // the phase lines
            // The product's default deadlines (the fixture's are shorter): a run waits stopped at its
            // boundary until the last case of its outage has reached its own, and the clock runs meanwhile.
            // A run made to fail gives up on its slow operand pod at once.
            {"OPERAND_WAIT_TIMEOUT", fails ? "3s" : "5m"},
            {"DRAIN_TIMEOUT_SECONDS", "0s"}};
  }

  // What one case checks; the first difference is the outcome's text, every one a test failure.
  struct Checks {
    std::vector<std::string> failed;
    void expect(bool ok, const std::string& what) {
      if (!ok) failed.push_back(what);
    }
    // The keys whose values differ between the two maps ("key" present in one only included).
    static std::string differing(const std::map<std::string, std::string>& a,
                                 const std::map<std::string, std::string>& b) {
      std::string out;
      for (const auto& [k, v] : a) {
        if (!b.contains(k) || b.at(k) != v) out += " " + k;
      }
      for (const auto& [k, v] : b) {
        if (!a.contains(k)) out += " " + k;
      }
      return out;
    }
    void same_node(const NodeState& got, const NodeState& want) {
      expect(got.labels == want.labels,
             "labels differ from before the run:" + differing(got.labels, want.labels));
      expect(got.annotations == want.annotations,
             "annotations differ from before the run:" + differing(got.annotations, want.annotations));
      expect(got.taints == want.taints, "taints differ from before the run");
      expect(got.unschedulable == want.unschedulable, "schedulability differs from before the run");
    }
  };

  // A killed run's leftovers healed by an immediate rerun of the same pod.
  static void rerun_heals(Scenario& s, const PathSpec& path, size_t sim_from, Checks& c, std::string& log) {
    auto r = s.run(sa_kubeconfig(), run_env(s));
    log += "\n--- rerun ---\n" + r.log;
    c.expect(r.exit_code == 0,
             "the rerun exited " + std::to_string(r.exit_code) + ": " + gave_up_line(r.log));
    if (!path.unloads()) return;  // the kept driver's holders come back with the restore
    c.expect(!s.sim().refcnt().has_value(), "the rerun did not unload the driver");
    const std::string back = holder_came_back(s.sim().log(), sim_from, log);
    c.expect(back.empty(), "a GPU holder came back before the unload: " + back);
  }

  // One case under way: its node, the run, what it checks.
  struct Case {
    const PathSpec& path;
    Boundary b;
    Fault f;
    std::string node;
    std::unique_ptr<Scenario> s{};
    std::unique_ptr<BackgroundProcess> dm{};
    NodeState before{};
    size_t sim_from = 0;  // node-sim's log up to the fault
    bool reached = false;
    Checks c{};
    std::string text{};
    std::string extra_log{};
    std::string kubeconfig{};  // the run's, when not the service account's own (through a relay)
  };

  // The node, the run, and the run stopped (SIGSTOP) the moment it logs the boundary's line: every fault
  // then meets it there, however quickly the run would have moved on.
  static void reach(Case& k) {
    k.s = prepare(k.path, k.b, k.node);
    k.before = k.s->state();
    k.dm = k.s->start(k.kubeconfig.empty() ? sa_kubeconfig() : k.kubeconfig,
                      cluster().state_dir() + "/" + k.node + ".log", run_env(*k.s, k.b.fails));
    std::string line = k.b.line;
    if (const auto at = line.find("{node}"); at != std::string::npos) line.replace(at, 6, k.node);
    if (!wait_line(*k.dm, line, 180)) {
      k.c.expect(false, "boundary not reached: no \"" + line + "\" in the log");
      return;
    }
    k.dm->signal(SIGSTOP);
    k.reached = true;
    k.sim_from = k.s->sim().log().size();
    // A killed or restarted run outlives the foreign lease, which the run then takes over.
    if (k.b.hold == Hold::kForeignLease && k.f != Fault::kSigterm)
      k.before.annotations.erase(kLeaseAnnotation);
  }

  // At a boundary at or after the unload the run may finish in the moment between its line and the SIGSTOP
  // (a loaded machine); a signal then meets a run that has done its work. That is an outcome of its own:
  // exit 0 with the success line, the node as it was (checked by conclude like every other).
  static bool finished_before_the_signal(Case& k, int code) {
    if (!k.b.tail || code != 0) return false;
    if (k.dm->log().find("Driver uninstallation completed successfully") == std::string::npos) return false;
    k.text = "completed before the signal";
    return true;
  }

  static void kill_fault(Case& k) {
    k.dm->signal(SIGKILL);
    const int killed = k.dm->wait(30);
    if (finished_before_the_signal(k, killed)) return;
    k.c.expect(killed == 128 + SIGKILL, "the run did not die of SIGKILL");
    if (k.b.hold == Hold::kMofed) release_mofed(*k.s);
    if (k.f == Fault::kSigkill) {
      rerun_heals(*k.s, k.path, k.sim_from, k.c, k.extra_log);
      k.text = "healed by the rerun";
      return;
    }
    const bool loaded = k.s->sim().refcnt().has_value();
    auto r = k.s->recover(sa_kubeconfig(), /*force=*/true);
    k.extra_log = "\n--- recover ---\n" + r.log;
    k.c.expect(r.exit_code == 0, "recover exited " + std::to_string(r.exit_code));
    k.c.expect(k.s->sim().refcnt().has_value() == loaded, "recover changed the driver");
    k.text = "recovered";
  }

  static void term_fault(Case& k) {
    const bool loaded = k.s->sim().refcnt().has_value();
    k.dm->signal(SIGTERM);
    k.dm->signal(SIGCONT);
    const int code = k.dm->wait(kGraceSeconds);
    if (finished_before_the_signal(k, code)) return;
    k.c.expect(code == 143, "exit " + std::to_string(code) + " within the grace period (want 143)");
    k.text = "143, restored";
    if (!k.b.tail && k.path.unloads())
      k.c.expect(k.s->sim().refcnt().has_value() == loaded, "the driver changed under SIGTERM");
  }

  // After the outage (the run was let go at its boundary when it began).
  static void after_outage(Case& k) {
    const int code = k.dm->wait(300);
    const std::string log = k.dm->log();
    if (k.b.fails) {
      k.c.expect(code == 1, "exit " + std::to_string(code) + " (want 1, the arranged failure)");
      const auto left = log.find("Could not restore node");
      k.c.expect(left == std::string::npos,
                 "the restore left something: " + log.substr(std::min(left, log.size())));
      k.text = "failed as arranged, restored";
      return;
    }
    k.c.expect(code == 0, "exit " + std::to_string(code) + ": " + gave_up_line(log));
    if (k.path.unloads()) {
      k.c.expect(!k.s->sim().refcnt().has_value(), "the driver was not unloaded");
      const std::string back = holder_came_back(k.s->sim().log(), k.sim_from, log);
      k.c.expect(back.empty(), "a GPU holder came back before the unload: " + back);
    }
    k.text = "completed";
    if (log.find(" 403") != std::string::npos || log.find("orbidden") != std::string::npos)
      k.text += " (met 403)";
    if (log.find("arrived late on node") != std::string::npos) k.text += " (evicted late arrivals)";
    if (log.find(kOverloadLine) != std::string::npos) k.text += " (met 429)";
  }

  static Outcome conclude(Case& k) {
    if (k.reached) k.c.same_node(k.s->state(), k.before);
    if (k.c.failed.empty()) return {true, k.text};
    std::string all;
    for (const auto& e : k.c.failed) all += "\n  " + e;
    ADD_FAILURE() << k.path.name << " / " << k.b.name << " / " << fault_name(k.f) << ":" << all << "\n"
                  << (k.dm ? tail_lines(k.dm->log() + k.extra_log, 60) : std::string());
    return {false, "FAIL: " + k.c.failed.front()};
  }

  // A signal case from start to end.
  static Outcome signal_case(Case& k) {
    reach(k);
    if (k.reached) (k.f == Fault::kSigterm ? term_fault : kill_fault)(k);
    return conclude(k);
  }

  // The API-server cases of one fault, one outage for all (every run already stopped at its boundary):
  // the API server goes away, the runs are let go into the outage, the server comes back.
  static void outage(std::vector<std::unique_ptr<Case>>& cases, Fault f,
                     std::chrono::seconds lasting = kOutage) {
    if (cases.empty()) return;
    if (f == Fault::kOverload) lasting = kOverloadFor;
    if (f == Fault::kApiStop) {
      cluster().stop_apiserver();
    } else if (f == Fault::kApiFreeze) {
      cluster().freeze_apiserver();
    } else {
      overload(true);
    }
    let_go(cases);
    std::this_thread::sleep_for(lasting);
    if (f == Fault::kApiStop) {
      cluster().start_apiserver();
    } else if (f == Fault::kApiFreeze) {
      cluster().thaw_apiserver();
    } else {
      overload(false);
    }
    after_all(cases);
    for (auto& k : cases) k->text = conclude(*k).text;
    // Which runs met 429s shows in their cells ("met 429"). It is not required: the server keeps at least one
    // seat for the level, so a 429 comes only when the runs' requests overlap, and a single case may not.
  }

  // API Priority and Fairness set to turn away the runs' service account's concurrent requests (a priority
  // level with no seats that rejects instead of queueing, and a flow schema sending the account there ahead
  // of the built-in ones), or set back. Waits until the API server has taken the change in: the flow schema's
  // Dangling condition turns False once the server's flow-control configuration controller has the schema and
  // its priority level (True while the level is not yet known to it: not in effect).
  static void overload(bool on) {
    const std::string name = kOverloadName;
    if (!on) {
      kubectl_ok(cluster(), {"delete", "flowschema,prioritylevelconfiguration", name, "--wait=true"});
      return;
    }
    cluster().apply(
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\n"
        "metadata:\n  name: " +
        name +
        "\nspec:\n  type: Limited\n  limited:\n"
        "    nominalConcurrencyShares: 0\n    lendablePercent: 0\n    borrowingLimitPercent: 0\n"
        "    limitResponse:\n      type: Reject\n"
        "---\napiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata:\n"
        "  name: " +
        name + "\nspec:\n  priorityLevelConfiguration:\n    name: " + name +
        "\n  matchingPrecedence: 100\n  distinguisherMethod:\n    type: ByUser\n  rules:\n"
        "  - subjects:\n    - kind: ServiceAccount\n      serviceAccount:\n        name: " +
        std::string(kSaName) + "\n        namespace: " + std::string(kSaNamespace) +
        "\n    resourceRules:\n    - verbs: [\"*\"]\n      apiGroups: [\"*\"]\n"
        "      resources: [\"*\"]\n      clusterScope: true\n      namespaces: [\"*\"]\n"
        "    nonResourceRules:\n    - verbs: [\"*\"]\n      nonResourceURLs: [\"*\"]\n");
    const bool taken = eventually(
        [&] {
          const auto fs = cluster().get_json({"flowschema", name});
          for (const auto& c : fs["status"].value("conditions", nlohmann::json::array())) {
            if (c.value("type", "") == "Dangling" && c.value("status", "") == "False") return true;
          }
          return false;
        },
        60);
    ASSERT_TRUE(taken) << "the API server did not take in flow schema " << name;
  }

  static constexpr size_t kThreads = 4;

  // Every case brought to its boundary and stopped there, a few at a time.
  static void reach_all(std::vector<std::unique_ptr<Case>>& cases) {
    std::vector<std::function<void()>> jobs;
    jobs.reserve(cases.size());
    for (auto& k : cases) jobs.emplace_back([&k] { reach(*k); });
    run_parallel(jobs, kThreads);
  }

  // Every reached run followed to its end once the fault is over, all at once.
  static void after_all(std::vector<std::unique_ptr<Case>>& cases) {
    std::vector<std::function<void()>> jobs;
    jobs.reserve(cases.size());
    for (auto& k : cases) {
      jobs.emplace_back([&k] {
        if (k->reached) after_outage(*k);
      });
    }
    run_parallel(jobs, cases.size());
  }

  // Every reached run let go (at the beginning of a fault).
  static void let_go(std::vector<std::unique_ptr<Case>>& cases) {
    for (auto& k : cases) {
      if (!k->reached) continue;
      k->dm->signal(SIGCONT);
      if (k->b.hold == Hold::kMofed) release_mofed(*k->s);
    }
  }

  // The service account's kubeconfig with a relay in place of the API server (its port).
  static std::string kubeconfig_via(const TcpRelay& relay, const std::string& name) {
    static const std::regex kServer(R"(server: https://127\.0\.0\.1:\d+)");
    std::string path = cluster().state_dir() + "/sa-via-" + name + ".kubeconfig";
    write_file(path, std::regex_replace(read_file(sa_kubeconfig()), kServer,
                                        "server: https://127.0.0.1:" + std::to_string(relay.port())));
    return path;
  }

  static int api_server_port() {
    static const std::regex kPort(R"(server: https://127\.0\.0\.1:(\d+))");
    std::smatch m;
    const std::string text = read_file(sa_kubeconfig());
    if (!std::regex_search(text, m, kPort)) throw std::runtime_error("no 127.0.0.1 server in the kubeconfig");
    return std::stoi(m[1].str());
  }

  // Runs `jobs` on `threads` threads; an exception fails the test.
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

  // Every case of one path, then its table: the signal cases a few at a time, then one outage per
  // API-server fault for all of its cases.
  static void sweep(const PathSpec& path) {
    const auto bs = boundaries(path);
    std::map<Fault, std::vector<std::unique_ptr<Case>>> by_fault;
    std::map<Case*, size_t> row;
    for (size_t i = 0; i < bs.size(); ++i) {
      if (!selected(bs[i].name)) continue;
      for (Fault f : faults_for(path, bs[i])) {
        auto k = std::make_unique<Case>(Case{
            .path = path,
            .b = bs[i],
            .f = f,
            .node = "fs-" + path.name + "-" + std::to_string(i) + "-" + std::to_string(static_cast<int>(f))});
        row[k.get()] = i;
        by_fault[f].push_back(std::move(k));
      }
    }
    std::vector<std::function<void()>> jobs;
    for (Fault f : {Fault::kSigkill, Fault::kSigterm, Fault::kRecover}) {
      for (auto& k : by_fault[f]) jobs.emplace_back([&k] { k->text = signal_case(*k).text; });
    }
    run_parallel(jobs, kThreads);
    // Per API-server fault: every case brought to its boundary (the runs wait there, stopped), one outage.
    for (Fault f : {Fault::kApiStop, Fault::kApiFreeze, Fault::kOverload}) {
      reach_all(by_fault[f]);
      outage(by_fault[f], f);
    }
    std::map<std::pair<size_t, Fault>, std::string> results;
    for (auto& [f, cases] : by_fault) {
      for (auto& k : cases) results[{row[k.get()], f}] = k->text;
      cases.clear();  // the nodes go
    }
    print_table(path, bs, results);
  }

  static void print_table(const PathSpec& path, const std::vector<Boundary>& bs,
                          const std::map<std::pair<size_t, Fault>, std::string>& results) {
    std::ostringstream out;
    out << "\nFault sweep, path " << path.name << " (boundary x fault -> outcome)\n";
    out << "| boundary | hold |";
    for (Fault f : kAllFaults) out << " " << fault_name(f) << " |";
    out << "\n|---|---|" << std::string(kAllFaults.size() * 4, '-') << "\n";
    static const std::map<Hold, const char*> kHold = {{Hold::kNone, "at the line"},
                                                      {Hold::kSlowPod, "slow pod"},
                                                      {Hold::kForeignLease, "foreign lease"},
                                                      {Hold::kMofed, "MOFED wait"}};
    for (size_t i = 0; i < bs.size(); ++i) {
      out << "| " << bs[i].name << " | " << kHold.at(bs[i].hold) << " |";
      for (Fault f : kAllFaults) {
        const auto it = results.find({i, f});
        out << " " << (it == results.end() ? "-" : it->second) << " |";
      }
      out << "\n";
    }
    std::cout << out.str() << std::flush;
  }

  // The cases of an etcd fault: the full path let go at the first write, in the operand wait and at the
  // cordon (every boundary under DM_SWEEP_ALL=1). The suite's cluster started with K8S_ETCD_MEMBERS=3
  // (ctest's fault_sweep_etcd_test).
  static std::vector<std::unique_ptr<Case>> etcd_cases(Fault f, const std::string& prefix) {
    if (!std::filesystem::exists(cluster().state_dir() + "/etcd-3.cmd"))
      throw std::runtime_error(
          "needs etcd as three members: run with K8S_ETCD_MEMBERS=3 (ctest fault_sweep_etcd_test)");
    // The cases hold their path by reference beyond this function.
    static const auto paths = sweep_paths();
    const PathSpec& path = paths[0];
    std::vector<std::unique_ptr<Case>> cases;
    for (const auto& b : boundaries(path)) {
      if (!sweep_all() && b.name != "first-write" && b.name != "pause-operands" && b.name != "cordon")
        continue;
      if (!selected(b.name)) continue;
      cases.push_back(std::make_unique<Case>(
          Case{.path = path, .b = b, .f = f, .node = prefix + std::to_string(cases.size())}));
    }
    return cases;
  }

  static void print_cases(const std::string& title, std::vector<std::unique_ptr<Case>>& cases) {
    std::ostringstream out;
    out << "\n" << title << "\n| boundary | outcome |\n|---|---|\n";
    for (auto& k : cases) out << "| " << k->b.name << " | " << conclude(*k).text << " |\n";
    std::cout << out.str() << std::flush;
  }
};

TEST_F(FaultSweep, FullPath) {
  sweep(sweep_paths()[0]);
}
TEST_F(FaultSweep, NoDriverPath) {
  sweep(sweep_paths()[1]);
}
TEST_F(FaultSweep, SkipPath) {
  sweep(sweep_paths()[2]);
}
TEST_F(FaultSweep, PolicyOnPath) {
  sweep(sweep_paths()[3]);
}

// An outage of 90 s - longer than a request's attempts used to span, and than the lease - at the run's first
// writes (the lease), in the operand wait, and in the restore after a failure: every request is tried again
// until the deadline of what it serves, so the runs complete (the failed one fails as arranged, restoring
// the node) and every node ends as it was. One outage for the three; with DM_SWEEP_ALL, at every boundary of
// the full path and the restore after a failure, one outage for them all.
TEST_F(FaultSweep, NinetySecondOutage) {
  const auto paths = sweep_paths();
  const PathSpec& path = paths[0];
  std::vector<Boundary> chosen;
  for (const auto& b : boundaries(path)) {
    if (sweep_all() ? selected(b.name) : b.name == "first-write" || b.name == "pause-operands")
      chosen.push_back(b);
  }
  ASSERT_GE(chosen.size(), sweep_all() ? 1U : 2U);
  chosen.push_back({.name = "restore-after-failure",
                    .line = "Performing cleanup on failure",
                    .hold = Hold::kSlowPod,
                    .slow = "op/nvidia-dcgm-exporter",
                    .fails = true});
  std::vector<std::unique_ptr<Case>> cases;
  for (size_t i = 0; i < chosen.size(); ++i) {
    cases.push_back(std::make_unique<Case>(
        Case{.path = path, .b = chosen[i], .f = Fault::kApiStop, .node = "lo-" + std::to_string(i)}));
  }
  reach_all(cases);
  outage(cases, Fault::kApiStop, kLongOutage);
  std::ostringstream out;
  out << "\nAPI server stopped for 90 s, path full\n| boundary | outcome |\n|---|---|\n";
  for (const auto& k : cases) out << "| " << k->b.name << " | " << k->text << " |\n";
  std::cout << out.str() << std::flush;
}

// The link between the node and the API server misbehaving, each fault through a relay of its own between
// its runs and the API server (every other client of the server is untouched), all three at once: a
// partition of 45 s (nothing passes, nothing is closed: every connection half-open, the requests in flight
// delivered late once it heals, as TCP would), 60 s of 500 ms latency each way with one chunk in ten held
// a second longer, and every connection reset 2, 6 and 12 s after the runs were let go (the watches of the
// operand wait and the eviction waits cut in the middle of their streams). The runs complete and every node
// ends as it was. DM_SWEEP_ALL=1: every boundary of the full path for each.
TEST_F(FaultSweep, BadNetwork) {
  const auto paths = sweep_paths();
  const PathSpec& path = paths[0];
  const std::map<Fault, std::set<std::string>> at = {{Fault::kPartition, {"first-write", "pause-operands"}},
                                                     {Fault::kSlowLink, {"pause-operands", "cordon"}},
                                                     {Fault::kReset, {"pause-operands", "cordon"}}};
  std::map<Fault, std::unique_ptr<TcpRelay>> relay;
  std::vector<std::unique_ptr<Case>> cases;
  for (const auto& [f, names] : at) {
    relay[f] = std::make_unique<TcpRelay>(api_server_port());
    const std::string slug = std::to_string(static_cast<int>(f));
    const std::string kubeconfig = kubeconfig_via(*relay[f], slug);
    for (const auto& b : boundaries(path)) {
      if ((!sweep_all() && !names.contains(b.name)) || !selected(b.name)) continue;
      cases.push_back(std::make_unique<Case>(Case{.path = path,
                                                  .b = b,
                                                  .f = f,
                                                  .node = "net-" + slug + "-" + std::to_string(cases.size()),
                                                  .kubeconfig = kubeconfig}));
    }
  }
  reach_all(cases);

  relay[Fault::kPartition]->set_partitioned(true);
  relay[Fault::kSlowLink]->set_latency(std::chrono::milliseconds(500));
  relay[Fault::kSlowLink]->set_stalls(0.1, std::chrono::seconds(1));
  let_go(cases);
  const auto t0 = std::chrono::steady_clock::now();
  size_t cut = 0;
  for (const int s : {2, 6, 12}) {
    std::this_thread::sleep_until(t0 + std::chrono::seconds(s));
    cut += relay[Fault::kReset]->reset_all();
  }
  std::this_thread::sleep_until(t0 + std::chrono::seconds(45));
  relay[Fault::kPartition]->set_partitioned(false);
  std::this_thread::sleep_until(t0 + std::chrono::seconds(60));
  relay[Fault::kSlowLink]->set_latency(std::chrono::milliseconds(0));
  relay[Fault::kSlowLink]->set_stalls(0, std::chrono::milliseconds(0));

  after_all(cases);
  std::ostringstream out;
  out << "\nThe node's link to the API server, path full (" << cut << " connections reset)\n"
      << "| boundary | fault | outcome |\n|---|---|---|\n";
  for (auto& k : cases)
    out << "| " << k->b.name << " | " << fault_name(k->f) << " | " << conclude(*k).text << " |\n";
  std::cout << out.str() << std::flush;
  EXPECT_GT(cut, 0U) << "no connection was open to reset: the fault did not happen";
}

// Two API servers on one etcd behind a load balancer (a relay spreading the runs' connections over both),
// killed one after the other, 15 s each, as in a rolling restart of a regional control plane: the runs'
// connections to the killed one break in the middle of whatever they carry while the other one answers;
// then the first one goes, which the controllers and node-sim (on it alone) meet as an outage. The runs
// complete and every node ends as it was.
TEST_F(FaultSweep, RollingRestartOfTwoApiServers) {
  const auto paths = sweep_paths();
  const PathSpec& path = paths[0];
  const int second = cluster().add_apiserver();
  TcpRelay balancer({api_server_port(), second});
  const std::string kubeconfig = kubeconfig_via(balancer, "balanced");
  std::vector<std::unique_ptr<Case>> cases;
  for (const auto& b : boundaries(path)) {
    if (!sweep_all() && b.name != "first-write" && b.name != "pause-operands" && b.name != "cordon") continue;
    if (!selected(b.name)) continue;
    cases.push_back(std::make_unique<Case>(Case{.path = path,
                                                .b = b,
                                                .f = Fault::kRollingRestart,
                                                .node = "ha-" + std::to_string(cases.size()),
                                                .kubeconfig = kubeconfig}));
  }
  reach_all(cases);
  let_go(cases);
  for (const int n : {2, 1}) {
    cluster().stop_apiserver(n);
    std::this_thread::sleep_for(kOutage);
    cluster().start_apiserver(n);
  }
  after_all(cases);
  cluster().stop_apiserver(2);  // the suite's other cases have one API server
  std::ostringstream out;
  out << "\nTwo API servers killed in turn, path full (" << balancer.accepted()
      << " connections through the balancer)\n| boundary | outcome |\n|---|---|\n";
  for (auto& k : cases) out << "| " << k->b.name << " | " << conclude(*k).text << " |\n";
  std::cout << out.str() << std::flush;
}

// A rolling upgrade of a control plane of two, caught half-way: the second API server runs the previous
// release (DM_SKEW_APISERVER, its kube-apiserver: bench/sweep builds it), the first the current one, the
// runs' connections spread over both by the balancer. Then the older one is upgraded: killed, and started
// 15 s later as the current release. Runs let go at three boundaries complete under answers from both
// releases and every node ends as it was. Not in ./scripts/test (it needs a second Kubernetes build).
TEST_F(FaultSweep, RollingUpgradeAcrossVersions) {
  const char* older_program = std::getenv("DM_SKEW_APISERVER");
  ASSERT_TRUE(older_program != nullptr && *older_program != '\0')
      << "needs DM_SKEW_APISERVER, the previous release's kube-apiserver (bench/sweep builds it)";
  const std::string current = cluster().apiserver_version(1);
  const int second = cluster().add_apiserver(older_program);
  const std::string older = cluster().apiserver_version(2);
  ASSERT_NE(older, current) << "DM_SKEW_APISERVER runs the same release as the cluster";
  TcpRelay balancer({api_server_port(), second});
  const std::string kubeconfig = kubeconfig_via(balancer, "skewed");
  const auto paths = sweep_paths();
  const PathSpec& path = paths[0];
  std::vector<std::unique_ptr<Case>> cases;
  for (const auto& b : boundaries(path)) {
    if (!sweep_all() && b.name != "first-write" && b.name != "pause-operands" && b.name != "cordon") continue;
    if (!selected(b.name)) continue;
    cases.push_back(std::make_unique<Case>(Case{.path = path,
                                                .b = b,
                                                .f = Fault::kRollingUpgrade,
                                                .node = "skew-" + std::to_string(cases.size()),
                                                .kubeconfig = kubeconfig}));
  }
  reach_all(cases);
  let_go(cases);
  std::this_thread::sleep_for(kOutage);  // both releases answer
  cluster().stop_apiserver(2);
  std::this_thread::sleep_for(kOutage);
  cluster().start_apiserver(2, cluster().apiserver_program());
  const std::string upgraded = cluster().apiserver_version(2);
  after_all(cases);
  cluster().stop_apiserver(2);  // the suite's other cases have one API server
  std::ostringstream out;
  out << "\nAPI servers at " << older << " and " << current << ", the older upgraded to " << upgraded
      << ", path full (" << balancer.accepted() << " connections through the balancer)\n"
      << "| boundary | outcome |\n|---|---|\n";
  for (auto& k : cases) out << "| " << k->b.name << " | " << conclude(*k).text << " |\n";
  std::cout << out.str() << std::flush;
  EXPECT_EQ(upgraded, current);
}

// etcd's leader killed for 15 s with the runs let go: the members left elect another, the API server's
// requests meet "leader changed" and timeouts meanwhile. The runs complete and every node ends as it was.
TEST_F(FaultSweep, EtcdLeaderLost) {
  auto cases = etcd_cases(Fault::kEtcdLeaderLost, "etcd-");
  reach_all(cases);
  const int leader = cluster().etcd_leader();
  cluster().stop_etcd(leader);
  let_go(cases);
  std::this_thread::sleep_for(kOutage);
  const int next = cluster().etcd_leader();
  cluster().start_etcd(leader);
  after_all(cases);
  print_cases("etcd leader (member " + std::to_string(leader) + ") killed for 15 s, member " +
                  std::to_string(next) + " elected, path full",
              cases);
  EXPECT_NE(next, leader);
}

// A follower that stops answering but keeps its connections (SIGSTOP) for 20 s while the runs go on: the
// API server's etcd client has connections to it whose requests hang until they time out, the leader and
// the other follower keep the quorum, and the frozen member falls behind. Thawed, it catches up. The runs
// complete and every node ends as it was; the member is asserted to have lagged and caught up.
TEST_F(FaultSweep, EtcdMemberLags) {
  auto cases = etcd_cases(Fault::kEtcdMemberLags, "lag-");
  reach_all(cases);
  const int leader = cluster().etcd_leader();
  const int follower = leader == 1 ? 2 : 1;
  // What the frozen member cannot apply: every entry the leader applies from here until the thaw.
  const std::uint64_t at_freeze = cluster().etcd_applied_index(follower);
  cluster().freeze_etcd(follower);
  let_go(cases);
  std::this_thread::sleep_for(std::chrono::seconds(20));
  const std::uint64_t at_thaw = cluster().etcd_applied_index(leader);
  cluster().thaw_etcd(follower);
  after_all(cases);
  const std::uint64_t caught_up = cluster().etcd_applied_index(follower);
  print_cases("etcd follower (member " + std::to_string(follower) + ") frozen for 20 s, " +
                  std::to_string(at_thaw - std::min(at_thaw, at_freeze)) +
                  " raft entries behind the leader when thawed, path full",
              cases);
  EXPECT_GT(at_thaw, at_freeze) << "nothing was written while the member was frozen: it never lagged";
  EXPECT_GE(caught_up, at_thaw) << "the thawed member did not catch up";
}

// The plan the sweep generates its boundaries from is the one each path's scenario makes the run take.
TEST(FaultSweepPlan, EachScenarioTakesItsPath) {
  const std::map<PathKind, manager::RunPath> want = {{PathKind::kFull, manager::RunPath::kFull},
                                                     {PathKind::kNoDriver, manager::RunPath::kNoDriver},
                                                     {PathKind::kSkip, manager::RunPath::kSkip},
                                                     {PathKind::kPolicy, manager::RunPath::kFull}};
  for (const auto& p : sweep_paths()) {
    EXPECT_EQ(manager::decide_steps(p.facts).path, want.at(p.kind)) << p.name;
    EXPECT_FALSE(manager::decide_steps(p.facts).phases().empty()) << p.name;
  }
}

}  // namespace
}  // namespace dm::test::uninstall
