// Third-party GPU client pods (docs/gpu-clients.md) end to end: a real control plane, node-sim and the
// driver-manager binary run as a least-privilege service account. Pods annotated nvidia.com/gpu.client=true
// are evicted and waited for by UID while a NoSchedule taint keeps their replacements off the node; the taint
// comes off after the unload, on failure, on SIGTERM and on the next run after a SIGKILL.
//
// Several tests hold driver-manager at a known point after the unload and before the taint removal: with
// GPU_DIRECT_RDMA_ENABLED and a (simulated) Mellanox device it waits for MOFED (after the unload) until the
// test creates the MOFED ready file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kOwnerAnnotation = "nvidia.com/gpu-driver-manager.tainted";
constexpr const char* kTaintKey = "nvidia.com/gpu-driver-update";
constexpr const char* kTaintValue = "k8s-driver-manager";
constexpr const char* kMofedWaitLine = "Waiting for MOFED to be installed";

class GpuClients : public UninstallSuite {
 public:
  // These tests exercise the taint mechanics with a dedicated key, as in a cluster that added the key to the
  // operator's DaemonSet tolerations (the test clients tolerate nothing, so it keeps them off). The default
  // key, nvidia.com/gpu, is covered by stock_operator_test.
  static void SetUpTestSuite() {
    setenv("GPU_CLIENT_TAINT", "nvidia.com/gpu-driver-update=k8s-driver-manager:NoSchedule", 1);
    UninstallSuite::SetUpTestSuite();
  }

 protected:
  static void deploy(Scenario& s, const std::vector<Client>& clients) {
    for (const auto& c : clients) s.deploy_client(c);
  }

  // The UID of the one running pod app=<app> on the node (fails the test if there is not exactly one).
  static std::string uid_of(const Scenario& s, const std::string& app) {
    const auto uids = s.running_uids(s.workload_ns(), "app=" + app);
    EXPECT_EQ(uids.size(), 1U) << "running pods of " << app;
    return uids.empty() ? std::string() : *uids.begin();
  }
  static std::string name_of(const Scenario& s, const std::string& app) {
    const auto pods = s.pods_in(s.workload_ns(), "app=" + app);
    return pods.empty() ? std::string() : pods.front()["metadata"].value("name", "");
  }
  // Pods app=<app> on the node in any state.
  static size_t on_node(const Scenario& s, const std::string& app) {
    return s.pods_in(s.workload_ns(), "app=" + app).size();
  }

  static json taints(const Scenario& s) { return s.taints(); }
  static size_t count_taints(const Scenario& s, const std::string& key,
                             const std::optional<std::string>& value, const std::string& effect) {
    size_t n = 0;
    for (const auto& t : taints(s)) {
      if (t.value("key", "") != key || t.value("effect", "") != effect) continue;
      if (value && t.value("value", "") != *value) continue;
      ++n;
    }
    return n;
  }
  static bool our_taint_on(const Scenario& s) {
    return count_taints(s, kTaintKey, kTaintValue, "NoSchedule") == 1;
  }
  static bool any_taint_with_our_key(const Scenario& s) {
    for (const auto& t : taints(s)) {
      if (t.value("key", "") == kTaintKey) return true;
    }
    return false;
  }

  // driver-manager in the background (stdout+stderr to a file).
  static std::unique_ptr<BackgroundProcess> start(const Scenario& s,
                                                  const std::map<std::string, std::string>& extra) {
    return std::make_unique<BackgroundProcess>(
        std::vector<std::string>{bin_path("driver-manager"), "uninstall_driver"},
        make_temp_dir("dm-gpu-clients") + "/driver-manager.log", s.env(sa_kubeconfig(), extra));
  }
  static bool wait_log(const BackgroundProcess& p, const std::string& text, double timeout_s = 90) {
    return eventually([&] { return p.log().find(text) != std::string::npos; }, timeout_s);
  }

  // A Mellanox NIC in the simulated sysfs: with GPU_DIRECT_RDMA_ENABLED the run waits for MOFED after the
  // unload, which holds it with the clients gone and the taint still on.
  static void add_mellanox(const Scenario& s) {
    const std::string dev = s.sim_path("/sys/bus/pci/devices/0000:3b:00.0");
    std::filesystem::create_directories(dev);
    write_file(dev + "/vendor", "0x15b3\n");
    write_file(dev + "/device", "0x101b\n");
    write_file(dev + "/class", "0x020000\n");
  }
  static void release_mofed(const Scenario& s) {
    std::filesystem::create_directories(s.sim_path("/run/mellanox/drivers"));
    write_file(s.sim_path("/run/mellanox/drivers/.driver-ready"), "");
  }

  static size_t evictions_since(const std::string& user, size_t from) {
    size_t n = 0;
    for (const auto& e : write_requests(cluster(), user, from)) {
      if (e.contains("objectRef") && e["objectRef"].value("subresource", "") == "eviction") ++n;
    }
    return n;
  }

  // The simulated module's users (ns/name) include the pods of `holding` and none of `not_holding`.
  static void expect_holders(Scenario& s, const std::vector<std::string>& holding,
                             const std::vector<std::string>& not_holding) {
    const auto users = s.sim().users();
    auto held_by = [&](const std::string& app) {
      const std::string prefix = s.workload_ns() + "/" + name_of(s, app);
      return std::find(users.begin(), users.end(), prefix) != users.end();
    };
    for (const auto& app : holding) EXPECT_TRUE(held_by(app)) << app << " does not hold the GPU";
    for (const auto& app : not_holding) EXPECT_FALSE(held_by(app)) << app << " holds the GPU";
  }

  static void expect_labels_restored(const Scenario& s, const std::vector<Operand>& ops) {
    for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
  }
  static void expect_no_taint_of_ours(const Scenario& s) {
    EXPECT_FALSE(any_taint_with_our_key(s)) << taints(s).dump();
    EXPECT_FALSE(s.has_annotation(kOwnerAnnotation));
  }
};

TEST_F(GpuClients, AnnotatedDaemonSetDeploymentAndStatefulSetPodsAreResetUnderTheTaint) {
  Scenario s(cluster(), "gc-kinds");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  deploy(s, {{.name = "agent-ds", .kind = "DaemonSet"},
             {.name = "agent-deploy", .kind = "Deployment"},
             {.name = "agent-sts", .kind = "StatefulSet"},
             {.name = "optout", .gpu_client = "false"},
             {.name = "plain", .gpu_client = ""}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 5);
  const std::string ds_uid = uid_of(s, "agent-ds");
  const std::string deploy_uid = uid_of(s, "agent-deploy");
  const std::string sts_uid = uid_of(s, "agent-sts");
  const std::string optout_uid = uid_of(s, "optout");
  const std::string plain_uid = uid_of(s, "plain");
  const std::string ds_pod = name_of(s, "agent-ds");
  // The three annotated clients hold the module; "false" and unannotated pods do not.
  expect_holders(s, {"agent-ds", "agent-deploy", "agent-sts"}, {"optout", "plain"});
  add_mellanox(s);

  // No cordon here (eviction and drain off): only the taint keeps the replacements away.
  auto dm = start(s, {{"GPU_DIRECT_RDMA_ENABLED", "true"}, {"ENABLE_GPU_POD_EVICTION", "false"}});
  ASSERT_TRUE(wait_log(*dm, kMofedWaitLine)) << dm->log();

  // Held after the unload: the simulated unload succeeded, so every holder was gone...
  EXPECT_FALSE(s.sim().refcnt().has_value()) << dm->log();
  // ...and the taint, ours, keeps the clients off: the DaemonSet controller does not recreate its pod, the
  // Deployment's and the StatefulSet's replacements stay unscheduled.
  EXPECT_TRUE(our_taint_on(s)) << taints(s).dump();
  EXPECT_TRUE(s.has_annotation(kOwnerAnnotation));
  EXPECT_EQ(on_node(s, "agent-ds"), 0U);
  EXPECT_EQ(on_node(s, "agent-deploy"), 0U);
  EXPECT_EQ(on_node(s, "agent-sts"), 0U);
  const auto ds = cluster().get_json({"daemonset", "agent-ds", "-n", s.workload_ns()});
  EXPECT_EQ(ds["status"].value("desiredNumberScheduled", -1), 0) << ds["status"].dump();
  // Opted out and unannotated pods are untouched.
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=optout"), std::set<std::string>{optout_uid});
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=plain"), std::set<std::string>{plain_uid});

  // Someone else taints the node meanwhile: removing ours must not lose theirs.
  kubectl_ok(cluster(), {"taint", "node", s.node(), "example.com/maintenance=planned:PreferNoSchedule"});
  release_mofed(s);
  ASSERT_EQ(dm->wait(120), 0) << dm->log();
  const std::string log = dm->log();

  EXPECT_THAT(log, HasSubstr("Tainting node gc-kinds with " + std::string(kTaintKey) + "=" + kTaintValue +
                             ":NoSchedule"));
  EXPECT_THAT(log, HasSubstr("gpu-client: " + s.workload_ns() + "/" + ds_pod + ": evict"));
  EXPECT_THAT(log, HasSubstr("evicting pod " + s.workload_ns() + "/agent-deploy-"));
  EXPECT_THAT(log, HasSubstr("evicting pod " + s.workload_ns() + "/agent-sts-0"));
  EXPECT_THAT(log, HasSubstr("/optout-"));
  EXPECT_THAT(log, HasSubstr("opted out"));
  EXPECT_THAT(log, Not(HasSubstr("evicting pod " + s.workload_ns() + "/optout-")));
  EXPECT_THAT(log, Not(HasSubstr("evicting pod " + s.workload_ns() + "/plain-")));
  EXPECT_THAT(log, HasSubstr("Removing taint " + std::string(kTaintKey)));
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));

  expect_no_taint_of_ours(s);
  EXPECT_EQ(count_taints(s, "example.com/maintenance", "planned", "PreferNoSchedule"), 1U)
      << taints(s).dump();
  expect_labels_restored(s, ops);
  // The clients return (new pods), the untouched ones kept running throughout.
  s.wait_running(s.workload_ns(), 5, {}, 90);
  for (const auto& [app, old] : std::map<std::string, std::string>{
           {"agent-ds", ds_uid}, {"agent-deploy", deploy_uid}, {"agent-sts", sts_uid}}) {
    const auto now = s.running_uids(s.workload_ns(), "app=" + app);
    EXPECT_EQ(now.size(), 1U) << app;
    EXPECT_EQ(now.count(old), 0U) << app << " was not reset";
  }
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=optout"), std::set<std::string>{optout_uid});
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=plain"), std::set<std::string>{plain_uid});
}

// Ten clients, more than the eviction has workers: the refused one shares a worker with others, whose
// evictions must not wait behind its retries (5 s apart, longer than the whole reset may take here).
TEST_F(GpuClients, PdbBlockedClientFailsAtTheDeadlineNamingTheBudgetAndTheNodeIsRestored) {
  Scenario s(cluster(), "gc-pdb");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  std::vector<Client> clients = {{.name = "a-guarded"}};
  for (int i = 0; i < 9; ++i) clients.push_back({.name = "free-" + std::to_string(i)});
  deploy(s, clients);
  s.block_with_pdb("guarded-budget", "a-guarded");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), clients.size());
  ASSERT_TRUE(eventually([&] {
    const auto pdb = cluster().get_json({"pdb", "guarded-budget", "-n", s.workload_ns()});
    return pdb["status"].value("expectedPods", 0) == 1;
  })) << "the disruption controller did not process the budget";
  const std::string guarded_uid = uid_of(s, "a-guarded");
  std::map<std::string, std::string> free_uids;
  for (size_t i = 1; i < clients.size(); ++i) free_uids[clients[i].name] = uid_of(s, clients[i].name);

  const auto r = s.run(sa_kubeconfig(), {{"GPU_CLIENT_EVICTION_TIMEOUT", "4s"}});
  ASSERT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("guarded-budget"));
  EXPECT_THAT(r.log, HasSubstr("GPU_CLIENT_EVICTION_TIMEOUT=4s"));
  EXPECT_THAT(r.log, HasSubstr("(will retry after 5s)"));
  // Told from the refusal's DisruptionBudget cause, not from its text.
  EXPECT_THAT(r.log, HasSubstr("a PodDisruptionBudget named above blocks the eviction"));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  // The blocked pod survived; the other clients were reset in parallel, none held up by its retries: the
  // timeout names the guarded pod alone as still present.
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=a-guarded"), std::set<std::string>{guarded_uid});
  for (const auto& entry : free_uids) {
    const std::string& app = entry.first;  // named, not bound: a lambda below uses them
    const std::string& uid = entry.second;
    EXPECT_THAT(r.log, HasSubstr("evicting pod " + s.workload_ns() + "/" + app + "-"));
    EXPECT_TRUE(eventually([&] { return s.running_uids(s.workload_ns(), "app=" + app).count(uid) == 0; }))
        << app;
  }
  const size_t timeout_at = r.log.find("waiting for GPU client pods to be evicted; still present: ");
  ASSERT_NE(timeout_at, std::string::npos) << r.log;
  const std::string still_present = r.log.substr(timeout_at, r.log.find('\n', timeout_at) - timeout_at);
  EXPECT_THAT(still_present, HasSubstr(s.workload_ns() + "/a-guarded-"));
  EXPECT_THAT(still_present, Not(HasSubstr("/free-")));
  expect_no_taint_of_ours(s);
  expect_labels_restored(s, ops);
}

TEST_F(GpuClients, BareAndMirrorPodsAreRefusedBeforeAnythingIsEvictedAndForceResetsTheBarePod) {
  Scenario s(cluster(), "gc-bare");
  deploy(s,
         {{.name = "bare", .kind = "Pod"}, {.name = "static-agent", .kind = "MirrorPod"}, {.name = "agent"}});
  s.wait_running(s.workload_ns(), 3);
  const std::string bare_uid = uid_of(s, "bare");
  const std::string agent_uid = uid_of(s, "agent");
  const size_t audit_from = cluster().audit_events().size();

  const auto refused = s.run(sa_kubeconfig());
  ASSERT_EQ(refused.exit_code, 1) << refused.log;
  EXPECT_THAT(refused.log, HasSubstr("refusing to reset GPU client pods"));
  EXPECT_THAT(refused.log, HasSubstr(s.workload_ns() + "/bare: has no controller"));
  EXPECT_THAT(refused.log, HasSubstr("DRAIN_USE_FORCE=true"));
  EXPECT_THAT(refused.log, HasSubstr(s.workload_ns() + "/static-agent: static (mirror) pod"));
  // Refused before anything changed: nothing evicted (not even the evictable client), no taint.
  EXPECT_EQ(evictions_since(sa_user(), audit_from), 0U);
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=bare"), std::set<std::string>{bare_uid});
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=agent"), std::set<std::string>{agent_uid});
  expect_no_taint_of_ours(s);

  // Without the static pod, DRAIN_USE_FORCE lets the bare pod go (for good: nothing recreates it).
  kubectl_ok(cluster(),
             {"-n", s.workload_ns(), "delete", "pod", "static-agent", "--grace-period=0", "--force"});
  ASSERT_TRUE(eventually([&] { return on_node(s, "static-agent") == 0; }));
  const auto forced = s.run(sa_kubeconfig(), {{"DRAIN_USE_FORCE", "true"}});
  ASSERT_EQ(forced.exit_code, 0) << forced.log;
  EXPECT_THAT(forced.log, HasSubstr("evicting pod " + s.workload_ns() + "/bare"));
  EXPECT_THAT(forced.log, HasSubstr("eviction deletes it for good"));
  EXPECT_EQ(on_node(s, "bare"), 0U);
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=agent").count(agent_uid), 0U);
  expect_no_taint_of_ours(s);
}

TEST_F(GpuClients, TaintToleratingDaemonSetPodIsWarnedAboutAndItsReplacementIsTakenAsALateArrival) {
  Scenario s(cluster(), "gc-tolerate");
  auto ops = default_operands();
  // An operand that holds the run in the operand wait until the test lets it go: the unload comes after the
  // DaemonSet's replacement has started and holds the GPU (the GPU workloads, going side by side, no
  // longer give it that time).
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});
  s.deploy_operands(ops);
  deploy(s, {{.name = "tolerant",
              .kind = "DaemonSet",
              .terminate_after = "1",
              .tolerations = json::array({{{"operator", "Exists"}}})}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const std::string original_uid = uid_of(s, "tolerant");
  const std::string original = name_of(s, "tolerant");

  auto dm = start(s, {});
  ASSERT_TRUE(eventually(
      [&] {
        const auto running = s.running_uids(s.workload_ns(), "app=tolerant");
        return running.size() == 1 && running.count(original_uid) == 0;
      },
      90))
      << dm->log();
  kubectl_ok(cluster(), {"-n", s.operator_ns(), "delete", "pods", "-l", "app=nvidia-dcgm", "--force",
                         "--grace-period=0"});
  const DmRun r{dm->wait(120), dm->log()};
  // The pod is evicted and its UID waited for, but the DaemonSet recreates it at once (it tolerates the
  // taint). The fresh look before the unload finds the replacement bound after the taint and evicts it as a
  // late arrival. Whether the DaemonSet's next replacement comes before that look ends is the controller's
  // timing: either the unload finds no holder (the modules go, refcount 0), or the run fails naming the
  // tolerant pod that holds the GPU. Never an unload with the replacement still holding it, and the node
  // restored either way.
  EXPECT_THAT(r.log, HasSubstr(s.workload_ns() + "/" + original + ": evict"));
  EXPECT_THAT(r.log, HasSubstr("tolerates the taint " + std::string(kTaintKey)));
  EXPECT_THAT(r.log, HasSubstr("DaemonSet/tolerant"));
  EXPECT_THAT(r.log, HasSubstr("nvidia.com/gpu.deploy.client"));
  EXPECT_THAT(r.log, HasSubstr("arrived late on node gc-tolerate: " + s.workload_ns() + "/tolerant-"));
  if (r.exit_code == 0) {
    EXPECT_FALSE(s.sim().refcnt().has_value()) << "a successful run unloaded the driver\n" << r.log;
    EXPECT_THAT(r.log, HasSubstr("Unloaded kernel module nvidia\n"));
  } else {
    ASSERT_EQ(r.exit_code, 1) << r.log;
    const bool refused = r.log.find("Could not unload NVIDIA driver kernel modules") != std::string::npos;
    const bool kept_arriving = r.log.find("GPU pods keep arriving on node gc-tolerate") != std::string::npos;
    EXPECT_TRUE(refused || kept_arriving) << r.log;
    EXPECT_TRUE(s.sim().refcnt().has_value()) << "a failed run leaves the module loaded";
  }
  expect_no_taint_of_ours(s);
  expect_labels_restored(s, ops);
}

TEST_F(GpuClients, ExistingTaintWithTheSameKeyIsNeitherDuplicatedNorRemoved) {
  Scenario s(cluster(), "gc-present");
  deploy(s, {{.name = "agent"}});
  s.wait_running(s.workload_ns(), 1);
  const std::string agent_uid = uid_of(s, "agent");
  // A NoSchedule taint does not affect running pods; the agent does not tolerate it.
  kubectl_ok(cluster(), {"taint", "node", s.node(), "nvidia.com/gpu=present:NoSchedule"});
  add_mellanox(s);

  auto dm =
      start(s, {{"GPU_DIRECT_RDMA_ENABLED", "true"}, {"GPU_CLIENT_TAINT", "nvidia.com/gpu:NoSchedule"}});
  ASSERT_TRUE(wait_log(*dm, kMofedWaitLine)) << dm->log();
  EXPECT_EQ(count_taints(s, "nvidia.com/gpu", std::nullopt, "NoSchedule"), 1U) << taints(s).dump();
  EXPECT_EQ(count_taints(s, "nvidia.com/gpu", "present", "NoSchedule"), 1U) << taints(s).dump();
  EXPECT_FALSE(s.has_annotation(kOwnerAnnotation));
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=agent").count(agent_uid), 0U) << "the client was not reset";
  EXPECT_EQ(on_node(s, "agent"), 0U) << "the existing taint keeps the replacement off";
  release_mofed(s);
  ASSERT_EQ(dm->wait(120), 0) << dm->log();

  EXPECT_THAT(dm->log(), HasSubstr("already has taint nvidia.com/gpu=present:NoSchedule"));
  EXPECT_EQ(count_taints(s, "nvidia.com/gpu", "present", "NoSchedule"), 1U) << taints(s).dump();
  EXPECT_EQ(taints(s).size(), 1U) << taints(s).dump();
}

TEST_F(GpuClients, SigtermAfterTaintingRemovesTheTaintRestoresLabelsAndExits143) {
  Scenario s(cluster(), "gc-term");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  deploy(s, {{.name = "slow", .terminate_after = "60"}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);

  auto dm = start(s, {});
  ASSERT_TRUE(wait_log(*dm, "evicting pod " + s.workload_ns() + "/slow-")) << dm->log();
  ASSERT_TRUE(our_taint_on(s)) << taints(s).dump();
  EXPECT_EQ(s.label(deploy_label("device-plugin")), "paused-for-driver-upgrade");
  dm->signal(SIGTERM);
  ASSERT_EQ(dm->wait(60), 143) << dm->log();
  EXPECT_THAT(dm->log(), HasSubstr("Removing taint " + std::string(kTaintKey)));
  expect_no_taint_of_ours(s);
  expect_labels_restored(s, ops);
}

TEST_F(GpuClients, SigkillAfterTaintingLeavesTheTaintAndTheRerunRemovesItAndCompletes) {
  Scenario s(cluster(), "gc-kill");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  deploy(s, {{.name = "agent", .terminate_after = "4"}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const std::string agent_uid = uid_of(s, "agent");

  auto dm = start(s, {});
  ASSERT_TRUE(wait_log(*dm, "evicting pod " + s.workload_ns() + "/agent-")) << dm->log();
  dm->signal(SIGKILL);
  ASSERT_EQ(dm->wait(30), 128 + SIGKILL);
  ASSERT_TRUE(our_taint_on(s)) << "a killed run cannot clean up: " << taints(s).dump();
  ASSERT_TRUE(s.has_annotation(kOwnerAnnotation));

  const auto rerun = s.run(sa_kubeconfig());
  ASSERT_EQ(rerun.exit_code, 0) << rerun.log;
  EXPECT_THAT(rerun.log, HasSubstr("left by an earlier run of driver-manager"));
  EXPECT_THAT(rerun.log, HasSubstr("Driver uninstallation completed successfully"));
  expect_no_taint_of_ours(s);
  expect_labels_restored(s, ops);
  s.wait_running(s.workload_ns(), 1, "app=agent", 90);
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=agent").count(agent_uid), 0U);
}

TEST_F(GpuClients, AutoUpgradePolicyOnStillResetsClientsAndLabelAndAnnotationClientsCoexist) {
  Scenario s(cluster(), "gc-policy");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.label_node({{deploy_label("client"), "true"}});
  s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");
  const std::map<std::string, std::string> by_label = {{deploy_label("client"), "true"}};
  deploy(s, {// upstream's nodeSelector contract: toggled through the node label, not annotated.
             {.name = "label-ds",
              .kind = "DaemonSet",
              .gpu_client = "",
              .holds_gpu = true,
              .node_selector = by_label},
             // Both: the label handles it (toleration-proof); it is not evicted on top.
             {.name = "both-ds", .kind = "DaemonSet", .node_selector = by_label},
             // Annotation only.
             {.name = "annotated"}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 3);
  const std::string label_uid = uid_of(s, "label-ds");
  const std::string both_uid = uid_of(s, "both-ds");
  const std::string annotated_uid = uid_of(s, "annotated");
  const std::string both_pod = name_of(s, "both-ds");
  expect_holders(s, {"label-ds", "both-ds", "annotated"}, {});

  const size_t audit_from = cluster().audit_events().size();
  const auto r = s.run(sa_kubeconfig());
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Auto upgrade policy of the GPU driver on the node is enabled"));
  EXPECT_THAT(r.log, HasSubstr("daemon set pods with nodeSelector key " + deploy_label("client")));
  EXPECT_THAT(r.log, Not(HasSubstr("evicting pod " + s.workload_ns() + "/" + both_pod)));
  EXPECT_THAT(r.log, HasSubstr("evicting pod " + s.workload_ns() + "/annotated-"));
  // The DaemonSet pod selecting the label went through the label (paused, waited for), not an eviction; the
  // policy owns workload eviction, so the annotated client is the one pod evicted.
  EXPECT_EQ(evictions_since(sa_user(), audit_from), 1U);
  EXPECT_THAT(r.log, HasSubstr("Driver uninstallation completed successfully"));
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "unloaded: every holder was gone";
  expect_no_taint_of_ours(s);
  EXPECT_EQ(s.label(deploy_label("client")), "true");
  s.wait_running(s.workload_ns(), 3, {}, 90);
  for (const auto& [app, old] : std::map<std::string, std::string>{
           {"label-ds", label_uid}, {"both-ds", both_uid}, {"annotated", annotated_uid}}) {
    EXPECT_EQ(s.running_uids(s.workload_ns(), "app=" + app).count(old), 0U) << app << " was not reset";
  }
}

// The other clients and the GPU workloads go side by side (in either order); the DRA-plugin client after
// both.
TEST_F(GpuClients, DraPluginClientIsResetAfterTheGpuWorkloadsAndTheOtherClients) {
  Scenario s(cluster(), "gc-dra");
  deploy(s, {{.name = "monitor"}, {.name = "dra-plugin", .dra_plugin = true}});
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.workload_ns(), 3);

  const auto r = s.run(sa_kubeconfig());
  ASSERT_EQ(r.exit_code, 0) << r.log;
  const auto monitor = r.log.find("evicting pod " + s.workload_ns() + "/monitor-");
  const auto trainer = r.log.find("evicting pod " + s.workload_ns() + "/trainer-");
  const auto plugin = r.log.find("evicting pod " + s.workload_ns() + "/dra-plugin-");
  ASSERT_NE(monitor, std::string::npos) << r.log;
  ASSERT_NE(trainer, std::string::npos) << r.log;
  ASSERT_NE(plugin, std::string::npos) << r.log;
  EXPECT_LT(monitor, plugin);
  EXPECT_LT(trainer, plugin);
  EXPECT_THAT(r.log, HasSubstr("DRA plugin client: reset after the GPU workloads"));
  expect_no_taint_of_ours(s);
}

// The annotated clients do not wait for the operands: with one operand pod held terminating, the client is
// evicted and gone, under the taint, while that operand pod is still on the node; the run goes on once it
// is gone. The taint is written before the first eviction (the service account's writes, in the API
// server's order).
TEST_F(GpuClients, ClientsAreResetWhileAnOperandIsStillTerminatingAndTheTaintComesFirst) {
  Scenario s(cluster(), "gc-overlap");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // held until the test removes it
  s.deploy_operands(ops);
  deploy(s, {{.name = "agent"}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const std::string agent_uid = uid_of(s, "agent");
  const size_t audit_from = cluster().audit_events().size();

  auto dm = start(s, {});
  ASSERT_TRUE(eventually([&] { return on_node(s, "agent") == 0; }, 90)) << dm->log();
  // The client is gone (and its replacement kept off by the taint) while the operand still terminates.
  const auto held = s.pods_in(s.operator_ns(), "app=nvidia-dcgm");
  ASSERT_EQ(held.size(), 1U) << dm->log();
  EXPECT_TRUE(held.front()["metadata"].contains("deletionTimestamp")) << held.front().dump();
  EXPECT_TRUE(our_taint_on(s)) << taints(s).dump();
  EXPECT_THAT(dm->log(), Not(HasSubstr("All GPU operand pods on the node have shut down")));

  // The taint is on the node now, and the run wrote it before its first eviction request (the audit log at
  // Metadata level cannot tell the taint's node patch from the run's other node writes, so the order comes
  // from the run's log; the node shows the result).
  const std::string so_far = dm->log();
  const auto tainting = so_far.find("Tainting node " + s.node());
  const auto first_eviction = so_far.find("evicting pod ");
  ASSERT_NE(tainting, std::string::npos) << so_far;
  ASSERT_NE(first_eviction, std::string::npos) << so_far;
  EXPECT_LT(tainting, first_eviction);
  EXPECT_EQ(evictions_since(sa_user(), audit_from), 1U);

  kubectl_ok(cluster(), {"-n", s.operator_ns(), "delete", "pods", "-l", "app=nvidia-dcgm", "--force",
                         "--grace-period=0"});
  ASSERT_EQ(dm->wait(120), 0) << dm->log();
  const std::string log = dm->log();
  EXPECT_THAT(log, HasSubstr("All GPU operand pods on the node have shut down"));
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));
  expect_no_taint_of_ours(s);
  expect_labels_restored(s, ops);
  s.wait_running(s.workload_ns(), 1, "app=agent", 90);
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=agent").count(agent_uid), 0U);
}

// A client reset that fails while an operand is still terminating ends the run at once: the operand wait is
// stopped, the run's error is the client's, and the taint and the labels are restored.
TEST_F(GpuClients, AClientFailureStopsTheOperandWaitAndRestoresTheNode) {
  Scenario s(cluster(), "gc-clientfail");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // never finishes terminating
  s.deploy_operands(ops);
  deploy(s, {{.name = "guarded"}});
  s.block_with_pdb("guarded-budget", "guarded");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  ASSERT_TRUE(eventually([&] {
    const auto pdb = cluster().get_json({"pdb", "guarded-budget", "-n", s.workload_ns()});
    return pdb["status"].value("expectedPods", 0) == 1;
  })) << "the disruption controller did not process the budget";

  const auto r =
      s.run(sa_kubeconfig(), {{"GPU_CLIENT_EVICTION_TIMEOUT", "6s"}, {"OPERAND_WAIT_TIMEOUT", "0"}});
  ASSERT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("GPU_CLIENT_EVICTION_TIMEOUT=6s"));
  EXPECT_THAT(r.log, HasSubstr("Performing cleanup on failure"));
  // The operand was never waited out (it still terminates), and its wait is not reported as a failure.
  const auto held = s.pods_in(s.operator_ns(), "app=nvidia-dcgm");
  ASSERT_EQ(held.size(), 1U);
  EXPECT_TRUE(held.front()["metadata"].contains("deletionTimestamp"));
  EXPECT_THAT(r.log, Not(HasSubstr("Failed to wait for nvidia-dcgm to shutdown")));
  EXPECT_THAT(r.log, Not(HasSubstr("failed to evict GPU operator components")));
  expect_no_taint_of_ours(s);
  expect_labels_restored(s, ops);
}

// An operand wait that fails while a client is still terminating ends the run at once too: the client reset
// is stopped, the run's error is the operand wait's (upstream's failure lines), the node is restored.
TEST_F(GpuClients, AnOperandWaitFailureStopsTheClientResetAndRestoresTheNode) {
  Scenario s(cluster(), "gc-opfail");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // never finishes terminating
  s.deploy_operands(ops);
  deploy(s, {{.name = "agent", .stuck = true}});
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);

  const auto r =
      s.run(sa_kubeconfig(), {{"OPERAND_WAIT_TIMEOUT", "6s"}, {"GPU_CLIENT_EVICTION_TIMEOUT", "0"}});
  ASSERT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("Failed to wait for nvidia-dcgm to shutdown"));
  EXPECT_THAT(r.log, HasSubstr("Failed to evict GPU operator components, attempting cleanup"));
  EXPECT_THAT(r.log, HasSubstr("failed to evict GPU operator components"));
  EXPECT_THAT(r.log, HasSubstr("evicting pod " + s.workload_ns() + "/agent-"));
  EXPECT_THAT(r.log, Not(HasSubstr("failed to reset GPU client pods")));
  // The client was evicted but never waited out: it still terminates.
  const auto agent = s.pods_in(s.workload_ns(), "app=agent");
  EXPECT_EQ(std::count_if(agent.begin(), agent.end(),
                          [](const json& p) { return p["metadata"].contains("deletionTimestamp"); }),
            1)
      << agent.size() << " agent pods";
  expect_no_taint_of_ours(s);
  expect_labels_restored(s, ops);
  kubectl_ok(cluster(),
             {"-n", s.workload_ns(), "delete", "pods", "-l", "app=agent", "--force", "--grace-period=0"});
}

TEST_F(GpuClients, SkipUninstallPathStillBouncesClientsAndRemovesTheTaint) {
  Scenario s(cluster(), "gc-skip");
  deploy(s, {{.name = "agent"}});
  s.wait_running(s.workload_ns(), 1);
  const std::string agent_uid = uid_of(s, "agent");
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-same\n");

  const auto r = s.run(sa_kubeconfig(), {{"DRIVER_CONFIG_DIGEST", "digest-same"}});
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log,
              HasSubstr("The NVIDIA driver is already loaded with the desired version and configuration"));
  // The driver stays, but the client (which may bind-mount the old driver root) was bounced.
  EXPECT_TRUE(s.sim().refcnt().has_value());
  EXPECT_THAT(r.log, HasSubstr("evicting pod " + s.workload_ns() + "/agent-"));
  expect_no_taint_of_ours(s);
  s.wait_running(s.workload_ns(), 1, "app=agent", 90);
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=agent").count(agent_uid), 0U);
}

TEST_F(GpuClients, NoDriverPathEvictsNothingButRemovesALeftoverTaintOfOurs) {
  NodeSimOptions o;
  o.no_driver = true;
  Scenario s(cluster(), "gc-nodriver", o);
  deploy(s, {{.name = "agent"}});
  s.wait_running(s.workload_ns(), 1);
  const std::string agent_uid = uid_of(s, "agent");
  // What a run killed after tainting leaves behind, next to an admin's taint with our key but another effect.
  const std::string ours = std::string(kTaintKey) + "=" + kTaintValue + ":NoSchedule";
  kubectl_ok(cluster(),
             {"taint", "node", s.node(), ours, std::string(kTaintKey) + "=admin:PreferNoSchedule"});
  s.annotate_node(kOwnerAnnotation, ours);
  const size_t audit_from = cluster().audit_events().size();

  const auto r = s.run(sa_kubeconfig());
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("No NVIDIA driver loaded"));
  EXPECT_THAT(r.log, HasSubstr("left by an earlier run of driver-manager"));
  EXPECT_EQ(evictions_since(sa_user(), audit_from), 0U);
  EXPECT_EQ(s.running_uids(s.workload_ns(), "app=agent"), std::set<std::string>{agent_uid});
  EXPECT_FALSE(our_taint_on(s)) << taints(s).dump();
  EXPECT_FALSE(s.has_annotation(kOwnerAnnotation));
  EXPECT_EQ(count_taints(s, kTaintKey, "admin", "PreferNoSchedule"), 1U) << taints(s).dump();
}

}  // namespace
}  // namespace dm::test::uninstall
