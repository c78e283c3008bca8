// The recipes of docs/gpu-clients.md, each third-party GPU client in the shape its own chart or its users
// give it, on a real control plane + node-sim, driver-manager run as the driver DaemonSet's pod runs it (its
// own pod named by POD_NAME) with the least-privilege role of deploy/clusterrole.yaml:
//
// * NVSentinel: a DaemonSet that selects nvidia.com/gpu.deploy.client through required node affinity (one
//   term In [true], one DoesNotExist) and tolerates every taint;
// * a standalone DCGM exporter from its chart (runtimeClassName nvidia), its nodeSelector given the client
//   label as the recipe says;
// * a notebook on runtimeClassName nvidia without a nvidia.com/gpu request, and a pod with
//   NVIDIA_VISIBLE_DEVICES=all (both Deployments);
// * a custom DaemonSet and a custom Deployment annotated nvidia.com/gpu.client=true;
// * NVIDIA's DRA driver from its own chart (DaemonSet dra-driver-nvidia-gpu-kubelet-plugin in a namespace of
//   its own, the chart's labels, affinity and toleration of nvidia.com/gpu), beside a workload holding a GPU
//   claim that the real scheduler allocated from the node's gpu.nvidia.com ResourceSlice.
//
// For each: `plan -o json` and the wave plan (`plan --all-nodes -o json`) name the pod with the rule that
// caught it; the run completes (exit 0) with the simulated nvidia module unloaded (the simulated host unloads
// only at refcount 0) while every client is kept off the node (each run is held after the unload:
// GPU_DIRECT_RDMA_ENABLED and a simulated Mellanox NIC make it wait for MOFED); its log names the rule; the
// node is restored and every client is back as a new pod.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kPlanner = "recipes-planner";
constexpr const char* kDriverPodApp = "nvidia-driver-daemonset";
constexpr const char* kDriverLabel = "nvidia.com/gpu.deploy.driver";
constexpr const char* kClientLabel = "nvidia.com/gpu.deploy.client";
constexpr const char* kMofedWaitLine = "Waiting for MOFED to be installed";
// The dedicated taint the DRA driver's recipe sets (its chart's kubelet plugin tolerates nvidia.com/gpu).
constexpr const char* kDedicatedTaint = "nvidia.com/gpu-driver-update=k8s-driver-manager:NoSchedule";
constexpr const char* kDedicatedKey = "nvidia.com/gpu-driver-update";
// The namespaces the charts install into (not the operator's).
constexpr const char* kNvSentinelNs = "nvsentinel";
constexpr const char* kMonitoringNs = "gpu-monitoring";
constexpr const char* kDraNs = "nvidia-dra-driver-gpu";
constexpr const char* kDraPluginSelector = "dra-driver-nvidia-gpu-component=kubelet-plugin";

std::string fill(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  }
  return text;
}

// What node-sim reads: the pod holds the GPU while it runs and takes 0.3 s to terminate.
constexpr const char* kSimAnnotations = R"(
        node-sim/holds-gpu: "true"
        node-sim/terminate-after-seconds: "0.3")";
// The same for a DaemonSet pod the label pause takes off: it takes 3 s to terminate, so that it is still
// there (terminating) when the run starts its operand wait, which names what it waits for.
constexpr const char* kPausedSimAnnotations = R"(
        node-sim/holds-gpu: "true"
        node-sim/terminate-after-seconds: "3")";

// The driver DaemonSet as the GPU Operator renders it (OnDelete, the configuration digest in the init
// container's environment), on the node only; its pod is the one driver-manager runs in.
std::string driver_daemonset(const Scenario& s, const std::string& extra_tolerations) {
  return fill(R"(apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-driver-daemonset, namespace: @NS@}
spec:
  updateStrategy: {type: OnDelete}
  selector: {matchLabels: {app: nvidia-driver-daemonset}}
  template:
    metadata:
      labels: {app: nvidia-driver-daemonset}
    spec:
      terminationGracePeriodSeconds: 60
      nodeSelector: {nvidia.com/gpu.deploy.driver: "true", dm-test/node: @NODE@}
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}@EXTRA@
      initContainers:
      - name: k8s-driver-manager
        image: example.com/driver-manager:1
        env:
        - {name: DRIVER_CONFIG_DIGEST, value: digest-old}
      containers:
      - {name: nvidia-driver-ctr, image: example.com/driver:1}
)",
              {{"@NS@", s.operator_ns()}, {"@NODE@", s.node()}, {"@EXTRA@", extra_tolerations}});
}

// NVSentinel's GPU-holding DaemonSet (the health monitor in embedded DCGM mode): it runs where the client
// label is "true" or absent, and tolerates every taint.
std::string nvsentinel_daemonset(const Scenario& s) {
  return fill(R"(apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: gpu-health-monitor
  namespace: nvsentinel
  labels: {app.kubernetes.io/name: gpu-health-monitor, app.kubernetes.io/instance: nvsentinel}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: gpu-health-monitor}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: gpu-health-monitor, app.kubernetes.io/instance: nvsentinel}
      annotations:@SIM@
    spec:
      terminationGracePeriodSeconds: 30
      nodeSelector: {dm-test/node: @NODE@}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: nvidia.com/gpu.deploy.client, operator: In, values: ["true"]}
            - matchExpressions:
              - {key: nvidia.com/gpu.deploy.client, operator: DoesNotExist}
      tolerations:
      - operator: Exists
      containers:
      - name: gpu-health-monitor
        image: example.com/nvsentinel/gpu-health-monitor:1
)",
              {{"@NODE@", s.node()}, {"@SIM@", kPausedSimAnnotations}});
}

// The DCGM exporter from its own chart (release dcgm-exporter), on the NVIDIA runtime class, with the
// recipe's nodeSelector value: the client label.
std::string dcgm_exporter_daemonset(const Scenario& s) {
  return fill(R"(apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: dcgm-exporter
  namespace: gpu-monitoring
  labels: {app.kubernetes.io/name: dcgm-exporter, app.kubernetes.io/instance: dcgm-exporter}
spec:
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1, maxSurge: 0}}
  selector: {matchLabels: {app.kubernetes.io/name: dcgm-exporter, app.kubernetes.io/instance: dcgm-exporter}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: dcgm-exporter, app.kubernetes.io/instance: dcgm-exporter}
      annotations:@SIM@
    spec:
      runtimeClassName: nvidia
      terminationGracePeriodSeconds: 30
      nodeSelector: {nvidia.com/gpu.deploy.client: "true", dm-test/node: @NODE@}
      containers:
      - name: exporter
        image: example.com/nvidia/k8s/dcgm-exporter:4
        securityContext:
          runAsNonRoot: false
          runAsUser: 0
          capabilities: {add: [SYS_ADMIN]}
        env:
        - {name: DCGM_EXPORTER_KUBERNETES, value: "true"}
        - {name: DCGM_EXPORTER_LISTEN, value: ":9400"}
        ports:
        - {name: metrics, containerPort: 9400}
)",
              {{"@NODE@", s.node()}, {"@SIM@", kPausedSimAnnotations}});
}

// A Deployment of one pod in the workload namespace whose pod spec ends with `spec_tail` (indented for the
// pod spec) and holds the GPU without requesting one.
std::string gpu_user_deployment(const Scenario& s, const std::string& name, const std::string& spec_tail) {
  return fill(R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: @NAME@, namespace: @NS@}
spec:
  replicas: 1
  selector: {matchLabels: {app: @NAME@}}
  template:
    metadata:
      labels: {app: @NAME@}
      annotations:@SIM@
    spec:
      terminationGracePeriodSeconds: 30
      nodeSelector: {dm-test/node: @NODE@}
@TAIL@)",
              {{"@NAME@", name},
               {"@NS@", s.workload_ns()},
               {"@NODE@", s.node()},
               {"@SIM@", kSimAnnotations},
               {"@TAIL@", spec_tail}});
}

// A Jupyter notebook that gets the GPUs through the NVIDIA runtime class.
std::string notebook_deployment(const Scenario& s) {
  return gpu_user_deployment(s, "notebook", R"(      runtimeClassName: nvidia
      containers:
      - name: notebook
        image: example.com/jupyter/pytorch-notebook:1
        ports:
        - {containerPort: 8888}
)");
}

// A monitoring agent that gets the GPUs through NVIDIA_VISIBLE_DEVICES (the runtime's default class).
std::string visible_devices_deployment(const Scenario& s) {
  return gpu_user_deployment(s, "gpu-agent", R"(      containers:
      - name: agent
        image: example.com/gpu-agent:1
        env:
        - {name: NVIDIA_VISIBLE_DEVICES, value: all}
        - {name: NVIDIA_DRIVER_CAPABILITIES, value: "utility,compute"}
)");
}

// The DRA driver's own chart (dra-driver-nvidia-gpu, release nvidia-dra-driver-gpu): its kubelet-plugin
// DaemonSet with the chart's labels, selector, affinity and toleration; the plugin holds the GPUs (NVML)
// while it runs.
std::string dra_chart_plugin_daemonset(const Scenario& s) {
  return fill(R"(apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: dra-driver-nvidia-gpu-kubelet-plugin
  namespace: nvidia-dra-driver-gpu
  labels:
    helm.sh/chart: dra-driver-nvidia-gpu-25.12.0
    app.kubernetes.io/managed-by: Helm
    app.kubernetes.io/name: dra-driver-nvidia-gpu
    app.kubernetes.io/instance: nvidia-dra-driver-gpu
spec:
  selector:
    matchLabels: {dra-driver-nvidia-gpu-component: kubelet-plugin}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: "100%"}}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: dra-driver-nvidia-gpu
        app.kubernetes.io/instance: nvidia-dra-driver-gpu
        dra-driver-nvidia-gpu-component: kubelet-plugin
      annotations:@SIM@
    spec:
      terminationGracePeriodSeconds: 30
      nodeSelector: {dm-test/node: @NODE@}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: feature.node.kubernetes.io/pci-10de.present, operator: In, values: ["true"]}
            - matchExpressions:
              - {key: nvidia.com/gpu.present, operator: In, values: ["true"]}
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      initContainers:
      - name: init-container
        image: example.com/dra-driver-nvidia/dra-driver-nvidia-gpu:1
        securityContext: {privileged: true}
        env:
        - {name: NVIDIA_VISIBLE_DEVICES, value: void}
      containers:
      - name: gpus
        image: example.com/dra-driver-nvidia/dra-driver-nvidia-gpu:1
        securityContext: {privileged: true}
        env:
        - {name: NVIDIA_VISIBLE_DEVICES, value: void}
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
)",
              {{"@NODE@", s.node()}, {"@SIM@", kSimAnnotations}});
}

// The node's GPUs as the DRA driver publishes them, the class that selects them, and a training Deployment
// whose pod holds one through a claim the scheduler allocates (node-sim counts it as a GPU holder).
std::string dra_claim_workload(const Scenario& s) {
  return fill(R"(apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: @NODE@-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: @NODE@
  pool: {name: @NODE@, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
  - name: gpu-1
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: @NS@}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: dra-training, namespace: @NS@}
spec:
  replicas: 1
  selector: {matchLabels: {app: dra-training}}
  template:
    metadata:
      labels: {app: dra-training}
      annotations: {node-sim/terminate-after-seconds: "0.3"}
    spec:
      terminationGracePeriodSeconds: 30
      nodeSelector: {dm-test/node: @NODE@}
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: one-gpu}
      containers:
      - name: train
        image: example.com/cuda-train:1
        resources:
          claims:
          - {name: gpu}
)",
              {{"@NODE@", s.node()}, {"@NS@", s.workload_ns()}});
}

// One client of a recipe: where its pods are, and what the plans and the run say about it.
struct Recipe {
  std::string name;  // as docs/gpu-clients.md names it
  std::string ns;
  std::string selector;  // its pods
  std::string action;    // in the plan
  std::string step;      // in the plan
  std::string rule;      // in the plan's reason
  std::string log;       // in the run's log; "@POD@" stands for the pod's ns/name
};

class ClientRecipes : public UninstallSuite {
 public:
  static void SetUpTestSuite() {
    UninstallSuite::SetUpTestSuite();
    cluster().apply(read_file(source_path("deploy/clusterrole-plan.yaml")));
    planner_kubeconfig_ = cluster().service_account_kubeconfig(kSaNamespace, kPlanner, "driver-manager-plan");
    // The class the NVIDIA Container Toolkit creates for its runtime.
    cluster().apply(
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: nvidia}\nhandler: nvidia\n");
  }

 protected:
  static void make_namespace(const std::string& ns) {
    cluster().apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n");
    ASSERT_TRUE(eventually([&] {
      return !cluster()
                  .kubectl({"-n", ns, "get", "sa", "default", "-o", "jsonpath={.metadata.name}"})
                  .out.empty();
    })) << "no default service account in "
        << ns;
  }

  // The driver DaemonSet on the node, its configuration digest older than the run's; returns its pod's name.
  static std::string deploy_driver(Scenario& s, const std::string& extra_tolerations = {}) {
    s.label_node({{kDriverLabel, "true"}});
    cluster().apply(driver_daemonset(s, extra_tolerations));
    s.wait_running(s.operator_ns(), 1, std::string("app=") + kDriverPodApp);
    write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-old\n");
    return s.pods_in(s.operator_ns(), std::string("app=") + kDriverPodApp)
        .front()["metadata"]
        .value("name", "");
  }

  // The one running pod of `r` on the node ("" and a failure when there is not exactly one).
  static json pod_of(const Scenario& s, const Recipe& r) {
    std::vector<json> running;
    for (const auto& p : s.pods_in(r.ns, r.selector)) {
      if (p["status"].value("phase", "") == "Running" && !p["metadata"].contains("deletionTimestamp"))
        running.push_back(p);
    }
    EXPECT_EQ(running.size(), 1U) << r.name << ": running pods";
    return running.empty() ? json::object() : running.front();
  }
  static std::string ref_of(const json& pod) {
    return pod["metadata"].value("namespace", "") + "/" + pod["metadata"].value("name", "");
  }

  // `driver-manager plan -o json [args]` as the read-only planner; `env` completes the environment.
  static json plan_json(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
    std::vector<std::string> argv = {bin_path("driver-manager"), "plan", "-o", "json"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto out = run_command(argv, {}, env);
    EXPECT_EQ(out.exit_code, 0) << out.out << out.err;
    try {
      return json::parse(out.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "plan printed no JSON (" << e.what() << "): " << out.out << out.err;
      return json::object();
    }
  }
  // The one-node plan on the node (the simulated host is read), as the run would plan it in its own pod.
  static json node_plan(const Scenario& s, const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> env = {{"HOSTNAME", "\x01unset"}};
    for (const auto& [k, v] : extra) env[k] = v;
    return plan_json({}, s.env(planner_kubeconfig_, env));
  }
  // This node's plan in `plan --all-nodes` (off the node: the host inferred from the driver pod), with the
  // operator's namespace and the new configuration digest the operator rolls out.
  static json wave_plan_of(const Scenario& s, const std::map<std::string, std::string>& extra) {
    std::map<std::string, std::string> env = {{"KUBECONFIG", planner_kubeconfig_},
                                              {"OPERATOR_NAMESPACE", s.operator_ns()},
                                              {"DRIVER_CONFIG_DIGEST", "digest-new"},
                                              {"ENABLE_GPU_POD_EVICTION", "true"},
                                              {"ENABLE_AUTO_DRAIN", "false"},
                                              {"NODE_NAME", "\x01unset"},
                                              {"HOSTNAME", "\x01unset"},
                                              {"POD_NAME", "\x01unset"},
                                              {"POD_NAMESPACE", "\x01unset"},
                                              {"DRIVER_MANAGER_SIM_ROOT", "\x01unset"}};
    for (const auto& [k, v] : extra) env[k] = v;
    const json wave = plan_json({"--all-nodes"}, env);
    for (const auto& n : wave.value("nodes", json::array())) {
      if (n.value("node", "") == s.node()) return n;
    }
    ADD_FAILURE() << "node " << s.node() << " is not in the wave: " << wave.dump(2);
    return json::object();
  }

  // The plan's entry for `pod` (ns/name), with the recipe's action, step and rule.
  static void expect_planned(const json& plan, const std::string& which, const Recipe& r,
                             const std::string& pod) {
    json entry;
    for (const auto& p : plan.value("pods", json::array())) {
      if (p.value("pod", "") == pod) entry = p;
    }
    ASSERT_FALSE(entry.is_null()) << which << " does not name " << r.name << " (" << pod
                                  << "): " << plan.dump(2);
    EXPECT_EQ(entry.value("action", ""), r.action) << which << ", " << r.name << ": " << entry.dump();
    EXPECT_EQ(entry.value("step", ""), r.step) << which << ", " << r.name << ": " << entry.dump();
    EXPECT_THAT(entry.value("reason", ""), HasSubstr(r.rule)) << which << ", " << r.name;
  }

  static bool holds_gpu(Scenario& s, const std::string& pod) {
    const auto users = s.sim().users();
    return std::find(users.begin(), users.end(), pod) != users.end();
  }

  // A Mellanox NIC in the simulated sysfs: with GPU_DIRECT_RDMA_ENABLED the run waits for MOFED after the
  // unload, which holds it with the node's changes still in place.
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

  // Node as before the run: no taint, schedulable, none of the run's annotations, the labels back.
  static void expect_restored(const Scenario& s, const std::map<std::string, std::string>& labels) {
    const auto st = s.state();
    EXPECT_FALSE(st.unschedulable);
    EXPECT_EQ(st.taints.size(), 0U) << st.taints.dump();
    for (const char* a : {kCordonedAnnotation, kTaintedAnnotation, kPausedLabelsAnnotation})
      EXPECT_EQ(st.annotations.count(a), 0U) << a;
    for (const auto& [k, v] : labels) {
      const auto it = st.labels.find(k);
      EXPECT_TRUE(it != st.labels.end() && it->second == v) << k;
    }
  }

  // Each recipe's client is back on the node as a new pod.
  static void expect_back_as_new_pods(const Scenario& s, const std::vector<Recipe>& recipes,
                                      const std::map<std::string, std::string>& old_uids) {
    for (const auto& r : recipes) {
      const bool back = eventually(
          [&] {
            const auto uids = s.running_uids(r.ns, r.selector);
            return uids.size() == 1 && uids.count(old_uids.at(r.name)) == 0;
          },
          90);
      EXPECT_TRUE(back) << r.name << " is not back on the node as a new pod";
    }
  }

  inline static std::string planner_kubeconfig_;
};

// Under the default taint (nvidia.com/gpu:NoSchedule), one run takes every recipe's client off by its own
// rule: NVSentinel and the DCGM exporter through the client label's pause (node affinity, nodeSelector), the
// notebook and the NVIDIA_VISIBLE_DEVICES pod as GPU workloads (cordon, eviction), the annotated DaemonSet
// and Deployment as GPU clients (taint, eviction).
TEST_F(ClientRecipes, EveryRecipeUnderTheDefaultTaintIsTakenOffByItsRuleKeptOffUntilTheUnloadAndBack) {
  Scenario s(cluster(), "rc-clients");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.label_node({{kClientLabel, "true"}});  // what the GPU Operator sets on GPU nodes
  const std::string driver_pod = deploy_driver(s);
  make_namespace(kNvSentinelNs);
  make_namespace(kMonitoringNs);
  cluster().apply(nvsentinel_daemonset(s));
  cluster().apply(dcgm_exporter_daemonset(s));
  cluster().apply(notebook_deployment(s));
  cluster().apply(visible_devices_deployment(s));
  s.deploy_client({.name = "custom-agent", .kind = "DaemonSet", .terminate_after = "0.3"});
  s.deploy_client({.name = "custom-service", .kind = "Deployment", .terminate_after = "0.3"});

  const std::string wl = s.workload_ns();
  const std::string affinity_rule = "node affinity on " + std::string(kClientLabel);
  const std::string selector_rule = "nodeSelector key " + std::string(kClientLabel);
  const std::vector<Recipe> recipes = {
      {"NVSentinel", kNvSentinelNs, "app.kubernetes.io/name=gpu-health-monitor", "wait", "operands",
       affinity_rule,
       "Waiting for daemon set pod @POD@ to terminate: its " + affinity_rule +
           " no longer matches once the label is paused"},
      {"standalone DCGM exporter", kMonitoringNs, "app.kubernetes.io/name=dcgm-exporter", "wait", "operands",
       selector_rule,
       // Upstream's line counts the DaemonSet pods the client label takes off: NVSentinel's and this one.
       "Waiting for 2 daemon set pod(s) with nodeSelector key \"" + std::string(kClientLabel) +
           "\" to terminate"},
      {"notebook on the NVIDIA runtime class", wl, "app=notebook", "evict", "gpu-workloads",
       "RuntimeClass \"nvidia\" runs it on the NVIDIA container runtime (handler \"nvidia\")",
       "@POD@: evict: GPU pod without a GPU request: RuntimeClass \"nvidia\" runs it on the NVIDIA container "
       "runtime (handler \"nvidia\")"},
      {"pod with NVIDIA_VISIBLE_DEVICES=all", wl, "app=gpu-agent", "evict", "gpu-workloads",
       "NVIDIA_VISIBLE_DEVICES=all in a container",
       "@POD@: evict: GPU pod without a GPU request: NVIDIA_VISIBLE_DEVICES=all in a container"},
      {"custom DaemonSet", wl, "app=custom-agent", "reset", "gpu-clients", "designated GPU client",
       "gpu-client: @POD@: evict: designated GPU client"},
      {"custom Deployment", wl, "app=custom-service", "reset", "gpu-clients", "designated GPU client",
       "gpu-client: @POD@: evict: designated GPU client"},
  };
  s.wait_running(s.operator_ns(), ops.size() + 1);
  for (const auto& r : recipes) s.wait_running(r.ns, 1, r.selector);
  std::map<std::string, std::string> pods;
  std::map<std::string, std::string> uids;
  for (const auto& r : recipes) {
    const json pod = pod_of(s, r);
    pods[r.name] = ref_of(pod);
    uids[r.name] = pod["metadata"].value("uid", "");
    EXPECT_TRUE(holds_gpu(s, pods[r.name])) << r.name << " does not hold the GPU";
  }
  // The clients and the operator's DCGM exporter hold the nvidia module.
  EXPECT_TRUE(eventually([&] {
    return s.sim().refcnt().value_or(-1) == static_cast<int>(recipes.size()) + 1;
  })) << "refcount "
      << s.sim().refcnt().value_or(-1);

  // The plans name each client with the rule that caught it, and what keeps it off.
  const std::map<std::string, std::string> own = {{"POD_NAME", driver_pod},
                                                  {"POD_NAMESPACE", s.operator_ns()}};
  const json plan = node_plan(s, own);
  const json wave = wave_plan_of(s, {});
  for (const auto& [which, p] : {std::pair<std::string, json>{"plan", plan}, {"plan --all-nodes", wave}}) {
    EXPECT_EQ(p.value("path", ""), "full") << which << ": " << p.dump(2);
    EXPECT_EQ(p["taint"].value("action", ""), "add") << which;
    EXPECT_EQ(p["cordon"].value("action", ""), "cordon") << which;
    for (const auto& r : recipes) expect_planned(p, which, r, pods[r.name]);
    EXPECT_EQ(p["clientsKeptOffByTaint"].get<std::set<std::string>>(),
              (std::set<std::string>{pods["custom DaemonSet"], pods["custom Deployment"]}))
        << which;
    EXPECT_TRUE(p["clientsToleratingTaint"].empty()) << which << ": " << p["clientsToleratingTaint"].dump();
    EXPECT_TRUE(p["refusals"].empty()) << which << ": " << p["refusals"].dump();
  }

  add_mellanox(s);
  auto dm = s.start(
      sa_kubeconfig(), make_temp_dir("dm-recipes") + "/driver-manager.log",
      {{"GPU_DIRECT_RDMA_ENABLED", "true"}, {"POD_NAME", driver_pod}, {"POD_NAMESPACE", s.operator_ns()}});
  ASSERT_TRUE(wait_for_log(*dm, kMofedWaitLine)) << dm->log();
  // After the unload: it succeeded, so no pod held the module (the simulated host unloads only at
  // refcount 0), and no client came back before it.
  EXPECT_FALSE(s.sim().refcnt().has_value()) << dm->log();
  for (const auto& r : recipes)
    EXPECT_TRUE(s.pods_in(r.ns, r.selector).empty()) << r.name << " is back on the node before the run ended";
  EXPECT_TRUE(s.unschedulable());
  release_mofed(s);
  ASSERT_EQ(dm->wait(120), 0) << dm->log();

  const std::string log = dm->log();
  for (const auto& r : recipes) EXPECT_THAT(log, HasSubstr(fill(r.log, {{"@POD@", pods[r.name]}}))) << r.name;
  EXPECT_THAT(log, Not(HasSubstr("Nothing keeps these GPU clients off")));
  EXPECT_THAT(log, Not(HasSubstr("found holding the GPU on the host")));
  EXPECT_THAT(log, HasSubstr("Unloaded kernel module nvidia\n"));
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));

  std::map<std::string, std::string> labels = {{kClientLabel, "true"}, {kDriverLabel, "true"}};
  for (const auto& op : ops) labels[deploy_label(op.label)] = "true";
  expect_restored(s, labels);
  expect_back_as_new_pods(s, recipes, uids);
}

// NVIDIA's DRA driver from its own chart: its kubelet plugin is recognised by the chart's labels (no
// annotation, not the operator's namespace), DRA counts as in use because it runs there, and it goes last:
// after the workload holding a GPU claim is evicted and the claim guard passed. The chart tolerates
// nvidia.com/gpu, so the default taint would not keep it off (the plan says so); the recipe's dedicated
// taint, which the driver DaemonSet tolerates, does.
TEST_F(ClientRecipes, TheDraDriversOwnChartIsRecognisedDrainedLastAndKeptOffByTheRecipesTaint) {
  Scenario s(cluster(), "rc-dra");
  const bool dra_api = cluster().kubectl({"get", "--raw", "/apis/resource.k8s.io/v1"}).exit_code == 0;
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.label_node({{"nvidia.com/gpu.present", "true"}});  // what the chart's node affinity selects
  const std::string driver_pod = deploy_driver(
      s, "\n      - {key: " + std::string(kDedicatedKey) + ", operator: Exists, effect: NoSchedule}");
  make_namespace(kDraNs);
  cluster().apply(dra_chart_plugin_daemonset(s));
  // The workload holds a claim the scheduler allocated from the node's slice (resource.k8s.io/v1, served
  // since Kubernetes 1.34); on an older server it requests nvidia.com/gpu instead.
  if (dra_api) {
    cluster().apply(dra_claim_workload(s));
  } else {
    s.deploy_gpu_workload("dra-training");
  }
  const Recipe plugin{
      "DRA driver from its own chart",
      kDraNs,
      kDraPluginSelector,
      "reset",
      "dra-plugin-clients",
      "the NVIDIA DRA kubelet plugin of the DRA driver's chart (" + std::string(kDraPluginSelector) + ")",
      "gpu-client: @POD@: evict: the NVIDIA DRA kubelet plugin of the DRA driver's chart (" +
          std::string(kDraPluginSelector) + "), a DRA plugin client by what it is"};
  const Recipe training{"claim-holding workload",
                        s.workload_ns(),
                        "app=dra-training",
                        "evict",
                        "gpu-workloads",
                        "",
                        "evicting pod " + s.workload_ns() + "/dra-training-"};
  s.wait_running(s.operator_ns(), ops.size() + 1);
  s.wait_running(kDraNs, 1, kDraPluginSelector);
  s.wait_running(s.workload_ns(), 1, "app=dra-training", 90);
  const json plugin_pod = pod_of(s, plugin);
  const json training_pod = pod_of(s, training);
  const std::string plugin_ref = ref_of(plugin_pod);
  const std::map<std::string, std::string> uids = {
      {plugin.name, plugin_pod["metadata"].value("uid", "")},
      {training.name, training_pod["metadata"].value("uid", "")}};
  EXPECT_TRUE(holds_gpu(s, plugin_ref)) << "the plugin does not hold the GPU";
  EXPECT_TRUE(holds_gpu(s, ref_of(training_pod))) << "the workload does not hold the GPU";

  // The plan under the default taint: the plugin is reset last, by what it is, and the plan says that the
  // taint does not keep it off.
  const std::map<std::string, std::string> own = {{"POD_NAME", driver_pod},
                                                  {"POD_NAMESPACE", s.operator_ns()}};
  const json by_default = node_plan(s, own);
  expect_planned(by_default, "plan (default taint)", plugin, plugin_ref);
  expect_planned(by_default, "plan (default taint)", training, ref_of(training_pod));
  EXPECT_EQ(by_default["clientsToleratingTaint"], json::array({plugin_ref})) << by_default.dump(2);
  std::string steps;
  for (const auto& st : by_default.value("steps", json::array())) steps += st.get<std::string>() + "\n";
  // The node's ResourceSlice (listed under the shipped ClusterRole) is the first evidence; without the
  // DRA API the plugin running here is.
  const std::string dra_reason = dra_api ? "the node has 1 gpu.nvidia.com ResourceSlice"
                                         : "the NVIDIA DRA kubelet plugin runs here (" + plugin_ref + ")";
  EXPECT_THAT(steps, HasSubstr("DRA is in use: " + dra_reason));
  // With the recipe's taint (plan and wave plan): kept off by it until the end.
  const std::map<std::string, std::string> dedicated = {{"GPU_CLIENT_TAINT", kDedicatedTaint}};
  std::map<std::string, std::string> own_dedicated = own;
  own_dedicated.insert(dedicated.begin(), dedicated.end());
  const json plan = node_plan(s, own_dedicated);
  const json wave = wave_plan_of(s, dedicated);
  for (const auto& [which, p] : {std::pair<std::string, json>{"plan", plan}, {"plan --all-nodes", wave}}) {
    EXPECT_EQ(p.value("path", ""), "full") << which << ": " << p.dump(2);
    expect_planned(p, which, plugin, plugin_ref);
    expect_planned(p, which, training, ref_of(training_pod));
    EXPECT_EQ(p["clientsKeptOffByTaint"], json::array({plugin_ref})) << which;
    EXPECT_TRUE(p["clientsToleratingTaint"].empty()) << which;
    EXPECT_TRUE(p["refusals"].empty()) << which << ": " << p["refusals"].dump();
    if (dra_api) {
      ASSERT_EQ(p["draClaims"].size(), 1U) << which << ": " << p["draClaims"].dump();
      EXPECT_EQ(p["draClaims"][0].value("pod", ""), ref_of(training_pod)) << which;
    }
  }

  add_mellanox(s);
  auto dm = s.start(sa_kubeconfig(), make_temp_dir("dm-recipes") + "/driver-manager.log",
                    {{"GPU_DIRECT_RDMA_ENABLED", "true"},
                     {"GPU_CLIENT_TAINT", kDedicatedTaint},
                     {"POD_NAME", driver_pod},
                     {"POD_NAMESPACE", s.operator_ns()}});
  ASSERT_TRUE(wait_for_log(*dm, kMofedWaitLine)) << dm->log();
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "unloaded: no pod held the module\n" << dm->log();
  EXPECT_TRUE(s.pods_in(kDraNs, kDraPluginSelector).empty()) << "the plugin is back before the run ended";
  EXPECT_TRUE(s.pods_in(s.workload_ns(), "app=dra-training").empty()) << "the workload is back";
  EXPECT_TRUE(s.has_annotation(kTaintedAnnotation)) << "the recipe's taint, ours, keeps the plugin off";
  release_mofed(s);
  ASSERT_EQ(dm->wait(120), 0) << dm->log();

  const std::string log = dm->log();
  EXPECT_THAT(log, HasSubstr("DRA is in use on node " + s.node() + ": " + dra_reason + ";"));
  EXPECT_THAT(log, HasSubstr(fill(plugin.log, {{"@POD@", plugin_ref}})));
  EXPECT_THAT(log, Not(HasSubstr("Nothing keeps these GPU clients off")));
  // The order: the claim holder, the claim guard, the plugin, the unload.
  const size_t workload_evicted = log.find(training.log);
  const size_t guard = log.find("Checking that no pod on the node still holds a GPU resource claim");
  const size_t plugin_evicted = log.find("evicting pod " + plugin_ref);
  const size_t unload = log.find("Unloading NVIDIA driver kernel modules");
  ASSERT_NE(workload_evicted, std::string::npos) << log;
  ASSERT_NE(guard, std::string::npos) << log;
  ASSERT_NE(plugin_evicted, std::string::npos) << log;
  ASSERT_NE(unload, std::string::npos) << log;
  EXPECT_LT(workload_evicted, guard) << log;
  EXPECT_LT(guard, plugin_evicted) << log;
  EXPECT_LT(plugin_evicted, unload) << log;
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));

  std::map<std::string, std::string> labels = {{kDriverLabel, "true"}, {"nvidia.com/gpu.present", "true"}};
  for (const auto& op : ops) labels[deploy_label(op.label)] = "true";
  expect_restored(s, labels);
  expect_back_as_new_pods(s, {plugin, training}, uids);
}

}  // namespace
}  // namespace dm::test::uninstall
