#include "support/memory_scenario.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include "host/host.h"
#include "kube/objects.h"
#include "manager/commands/uninstall_flow.h"
#include "simulator.h"
#include "support/cluster.h"
#include "support/process.h"

namespace dm::test {

using Json = nlohmann::json;

namespace {
// Everything here is in memory and in-process: a short poll costs little and keeps the cases fast.
constexpr std::chrono::milliseconds kPoll(5);
}  // namespace

std::vector<MemOperand> default_mem_operands() {
  return {{"device-plugin", "nvidia-device-plugin-daemonset", false, false},
          {"gpu-feature-discovery", "gpu-feature-discovery", false, false},
          {"dcgm-exporter", "nvidia-dcgm-exporter", true, false},
          {"operator-validator", "nvidia-operator-validator", false, false}};
}

// spdlog's default logger into a string ("<level> <message>" lines) that may be read while threads log.
class MemoryScenario::Log {
 public:
  Log() : previous_(spdlog::default_logger()), sink_(std::make_shared<Sink>()) {
    sink_->set_pattern("%l %v");
    auto logger = std::make_shared<spdlog::logger>("memory-scenario", sink_);
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  }
  ~Log() { spdlog::set_default_logger(previous_); }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;
  [[nodiscard]] std::string text() const { return sink_->text(); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::string text() {
      const std::lock_guard lock(mutex_);
      return text_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      spdlog::memory_buf_t formatted;
      formatter_->format(msg, formatted);
      text_.append(formatted.data(), formatted.size());
    }
    void flush_() override {}

   private:
    std::string text_;
  };
  std::shared_ptr<spdlog::logger> previous_;
  std::shared_ptr<Sink> sink_;
};

MemoryScenario::MemoryScenario(std::string node, bool driver)
    : log_(std::make_unique<Log>()), node_(std::move(node)), root_(make_temp_dir("dm-mem")) {
  std::filesystem::create_directories(root_ + "/run/nvidia");
  std::filesystem::create_directories(root_ + "/sys/bus/pci/devices");
  cluster_.use_clock(clock_);
  cluster_.apply(memory_node(node_));
  cluster_.start_daemonsets();
  nodesim::SimOptions o;
  o.node = node_;
  o.sim_root = root_;
  o.driver = driver;
  // On the quiescent clock every tick of node-sim's watch is a move of time: 100 ms steps instead of its
  // 10 ms (what is due is reconciled at the next tick; a change wakes the watch at once either way).
  o.tick = std::chrono::milliseconds(100);
  sim_ = std::thread([this, o] {
    nodesim::Simulator sim(o, cluster_.controller_client(), cluster_.controller_client(), clock_, stop_sim_);
    (void)sim.run();
  });
  const bool ready = eventually(
      [&] {
        const auto n = node_json();
        return kube::node_ready(n) &&
               (!driver || std::filesystem::exists(root_ + "/sys/module/nvidia/refcnt"));
      },
      30, kPoll);
  if (!ready) throw std::runtime_error("node-sim did not register node " + node_);
}

MemoryScenario::~MemoryScenario() {
  stop_sim_.cancel();
  if (sim_.joinable()) sim_.join();
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
  log_.reset();
}

void MemoryScenario::label_node(const std::map<std::string, std::string>& labels) {
  Json n = node_json();
  for (const auto& [k, v] : labels) n["metadata"]["labels"][k] = v;
  cluster_.apply(n);
}

void MemoryScenario::annotate_node(const std::string& key, const std::string& value) {
  Json n = node_json();
  n["metadata"]["annotations"][key] = value;
  cluster_.apply(n);
}

void MemoryScenario::cordon() {
  Json n = node_json();
  n["spec"]["unschedulable"] = true;
  cluster_.apply(n);
}

namespace {

// A DaemonSet whose pods (labelled app=<name>) select nodes by `node_selector`; node-sim reads `annotations`.
Json daemonset_json(const std::string& name, const std::string& ns,
                    const std::map<std::string, std::string>& node_selector, const Json& annotations,
                    const Json& affinity_terms = nullptr) {
  Json ds = {
      {"apiVersion", "apps/v1"},
      {"kind", "DaemonSet"},
      {"metadata", {{"name", name}, {"namespace", ns}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", name}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", name}}}, {"annotations", annotations}}},
          {"spec",
           {{"terminationGracePeriodSeconds", 5},
            {"nodeSelector", node_selector},
            {"containers", Json::array({{{"name", "main"}, {"image", "example.com/operand:1"}}})}}}}}}}};
  if (!affinity_terms.is_null()) {
    ds["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
      ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = affinity_terms;
  }
  return ds;
}

Json node_sim_annotations(bool holds_gpu, bool stuck) {
  Json ann = {{"node-sim/terminate-after-seconds", "0.1"}};
  if (holds_gpu) ann["node-sim/holds-gpu"] = "true";
  if (stuck) ann["node-sim/stuck-terminating"] = "true";
  return ann;
}

}  // namespace

void MemoryScenario::deploy_operands(const std::vector<MemOperand>& operands) {
  std::map<std::string, std::string> labels;
  for (const auto& op : operands) {
    const std::string key = "nvidia.com/gpu.deploy." + op.label;
    labels[key] = "true";
    cluster_.apply(
        daemonset_json(op.app, operator_ns(), {{key, "true"}}, node_sim_annotations(op.holds_gpu, op.stuck)));
  }
  label_node(labels);
}

void MemoryScenario::deploy_daemonset(const MemDaemonSet& ds) {
  Json ann = node_sim_annotations(ds.holds_gpu, ds.stuck);
  if (!ds.gpu_client.empty()) ann["nvidia.com/gpu.client"] = ds.gpu_client;
  Json object = daemonset_json(ds.name, ds.ns.empty() ? workload_ns() : ds.ns, ds.node_selector, ann,
                               ds.affinity_terms);
  for (const auto& [k, v] : ds.pod_labels) object["spec"]["template"]["metadata"]["labels"][k] = v;
  if (!ds.tolerations.is_null()) object["spec"]["template"]["spec"]["tolerations"] = ds.tolerations;
  if (!ds.resource_claims.is_null())
    object["spec"]["template"]["spec"]["resourceClaims"] = ds.resource_claims;
  cluster_.apply(object);
  label_node(ds.node_selector);
  if (!ds.node_labels.empty()) label_node(ds.node_labels);
}

void MemoryScenario::deploy(const MemSetup& setup) {
  std::map<std::string, size_t> per_ns;
  if (!setup.operands.empty()) deploy_operands(setup.operands);
  per_ns[operator_ns()] += setup.operands.size();
  for (const auto& ds : setup.daemonsets) {
    deploy_daemonset(ds);
    ++per_ns[ds.ns.empty() ? workload_ns() : ds.ns];
  }
  for (const auto& p : setup.pods) {
    deploy_pod(p);
    ++per_ns[p.ns.empty() ? workload_ns() : p.ns];
  }
  for (const auto& [ns, n] : per_ns) wait_running(ns, n);
}

void MemoryScenario::add_gpu_claim(const std::string& name) {
  add_claim(name, "gpu.nvidia.com");
}

Json MemoryScenario::add_claim(const std::string& name, const std::string& driver, const std::string& ns) {
  return cluster_.apply(
      {{"apiVersion", "resource.k8s.io/v1"},
       {"kind", "ResourceClaim"},
       {"metadata", {{"name", name}, {"namespace", ns.empty() ? workload_ns() : ns}}},
       {"spec", {{"devices", {{"requests", Json::array({{{"name", "gpu"}}})}}}}},
       {"status",
        {{"allocation",
          {{"devices",
            {{"results",
              Json::array(
                  {{{"request", "gpu"}, {"driver", driver}, {"pool", node_}, {"device", "gpu-0"}}})}}}}}}}});
}

void MemoryScenario::add_runtime_class(const std::string& name, const std::string& handler) {
  cluster_.apply({{"apiVersion", "node.k8s.io/v1"},
                  {"kind", "RuntimeClass"},
                  {"metadata", {{"name", name}}},
                  {"handler", handler}});
}

void MemoryScenario::add_mellanox_device(const std::string& bdf) {
  const std::string dir = root_ + "/sys/bus/pci/devices/" + bdf;
  std::filesystem::create_directories(dir);
  write_file(dir + "/vendor", "0x15b3\n");
}

void MemoryScenario::deploy_pod(const MemPod& p) {
  Json ann = {{"node-sim/terminate-after-seconds", p.terminate_after}};
  if (!p.gpu_client.empty()) ann["nvidia.com/gpu.client"] = p.gpu_client;
  if (p.dra_plugin) ann["nvidia.com/gpu.client.dra-plugin"] = "true";
  if (p.holds_gpu) ann["node-sim/holds-gpu"] = "true";
  if (p.stuck) ann["node-sim/stuck-terminating"] = "true";
  for (const auto& [k, v] : p.annotations) ann[k] = v;
  Json labels = {{"app", p.name}};
  for (const auto& [k, v] : p.labels) labels[k] = v;
  Json container = {{"name", p.container}, {"image", "example.com/cuda-app:1"}};
  for (const auto& [k, v] : p.env) container["env"].push_back({{"name", k}, {"value", v}});
  if (p.request_gpu) container["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", p.name},
                {"namespace", p.ns.empty() ? workload_ns() : p.ns},
                {"labels", labels},
                {"annotations", ann}}},
              {"spec",
               {{"nodeName", node_},
                {"terminationGracePeriodSeconds", p.grace_period_seconds},
                {"containers", Json::array({container})}}}};
  if (!p.runtime_class.empty()) pod["spec"]["runtimeClassName"] = p.runtime_class;
  if (!p.gpu_claim.empty()) {
    pod["spec"]["resourceClaims"] = Json::array({{{"name", "gpu"}, {"resourceClaimName", p.gpu_claim}}});
  }
  if (!p.owner_kind.empty()) {
    pod["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "apps/v1"},
                                                       {"kind", p.owner_kind},
                                                       {"name", p.name + "-rs"},
                                                       {"uid", "owner-" + p.name},
                                                       {"controller", true}}});
  }
  cluster_.apply(pod);
}

void MemoryScenario::block_with_pdb(const std::string& name, const std::string& app) {
  cluster_.apply({{"apiVersion", "policy/v1"},
                  {"kind", "PodDisruptionBudget"},
                  {"metadata", {{"name", name}, {"namespace", workload_ns()}}},
                  {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", app}}}}}}}});
}

size_t MemoryScenario::running(const std::string& ns) const {
  size_t n = 0;
  for (const auto& p : cluster_.objects(kube::paths::pods(ns))) {
    if (kube::pod_node_name(p) == node_ && kube::pod_phase(p) == "Running" && !kube::terminating(p)) ++n;
  }
  return n;
}

void MemoryScenario::wait_running(const std::string& ns, size_t n) const {
  if (!eventually([&] { return running(ns) == n; }, 30, kPoll)) {
    throw std::runtime_error("expected " + std::to_string(n) + " running pods in " + ns);
  }
}

Json MemoryScenario::node_json() const {
  auto n = cluster_.find(kube::paths::node(node_));
  return n ? *n : Json::object();
}

MemNodeState MemoryScenario::state() const {
  const Json n = node_json();
  MemNodeState st;
  st.labels = kube::labels(n);
  st.annotations = kube::annotations(n);
  if (const Json* t = kube::find(n, {"spec", "taints"})) st.taints = *t;
  st.unschedulable = kube::node_unschedulable(n);
  return st;
}

std::string MemoryScenario::label(const std::string& key) const {
  return kube::label(node_json(), key).value_or("<absent>");
}

bool MemoryScenario::driver_loaded() const {
  return std::filesystem::exists(root_ + "/sys/module/nvidia");
}

size_t MemoryScenario::requests_with(const std::string& part) const {
  size_t n = 0;
  for (const auto& r : cluster_.requests()) n += r.find(part) != std::string::npos ? 1 : 0;
  return n;
}

std::vector<std::string> MemoryScenario::evicted() const {
  std::vector<std::string> out;
  for (const auto& r : cluster_.requests()) {
    const auto ref = MemoryCluster::parse_path(r.substr(r.find(' ') + 1));  // "<VERB> <path>"
    if (!ref || ref->resource != "pods" || ref->sub != "eviction") continue;
    std::string key = ref->ns;
    key += "/";
    key += ref->name;
    if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(std::move(key));
  }
  return out;
}

manager::Settings MemoryScenario::settings() const {
  manager::Settings s;
  s.node_name = node_;
  s.operator_namespace = operator_ns();
  s.sim_root = root_;
  s.vfio_manage = "true";  // vfio-manage has tests of its own; the flow only runs it
  s.enable_gpu_pod_eviction = true;
  s.enable_auto_drain = false;
  s.drain_timeout = std::chrono::seconds(20);
  s.operand_wait_timeout = std::chrono::seconds(20);
  s.gpu_client_eviction_timeout = std::chrono::seconds(20);
  s.eviction_retry_interval = std::chrono::milliseconds(200);
  s.driver_config_digest = "digest-new";
  s.pre_installed_sleep = std::chrono::milliseconds(100);
  return s;
}

MemRun MemoryScenario::run(const manager::Settings& settings, const CancelToken& cancel) {
  const size_t from = log_->text().size();
  auto host = host::make_host(settings.sim_root);
  int code = -1;
  TimePoint ended_at{};
  {
    manager::Uninstall flow(settings, cluster_, *host, clock_, cancel);
    kube::Config config;
    config.server = "memory://cluster";
    config.source = "the in-memory cluster";
    code = flow.run(config);
    ended_at = clock_.now();
    flow.finish(code);
  }  // the flow's threads end with it
  return {code, log_->text().substr(from), clock_.now() - ended_at};
}

}  // namespace dm::test
