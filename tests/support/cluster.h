// A real control plane for one test suite: `scripts/cluster up` on start, `down` on destruction.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/process.h"

namespace dm::test {

// The kubectl built with the control plane ($K8S_CACHE/bin/kubectl, default
// /var/cache/driver-manager-test-cluster/bin), else `kubectl` from PATH.
std::string kubectl_program();

class TestCluster {
 public:
  // Starts a cluster (the binaries must have been built with `scripts/cluster build`). Throws on failure
  // with the script's stderr.
  static std::unique_ptr<TestCluster> start();
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  [[nodiscard]] const std::string& kubeconfig() const { return kubeconfig_; }
  [[nodiscard]] const std::string& state_dir() const { return state_dir_; }
  [[nodiscard]] std::string audit_log_path() const { return state_dir_ + "/audit.log"; }

  // kubectl --kubeconfig <admin> args... (the kubectl scripts/cluster build made, see kubectl_program()).
  CommandOutput kubectl(const std::vector<std::string>& args, const std::string& stdin_data = {}) const;
  // kubectl apply -f - ; throws with kubectl's stderr on failure.
  void apply(const std::string& yaml) const;
  // kubectl get <args> -o json, parsed; throws on failure.
  nlohmann::json get_json(const std::vector<std::string>& args) const;
  // The API server serves `group_version` (e.g. "resource.k8s.io/v1": Kubernetes 1.34 and later).
  [[nodiscard]] bool serves(const std::string& group_version) const;

  // Every audit event so far (one JSON object per line of audit.log).
  [[nodiscard]] std::vector<nlohmann::json> audit_events() const;

  // Kills kube-apiserver / starts it again with its saved arguments (waits until ready); throws on failure.
  // etcd, the controller-manager and the scheduler keep running, as in a control-plane restart.
  // `n`: which API server (2: the one add_apiserver started).
  // `program`: start it as another kube-apiserver program (another release) from now on.
  void stop_apiserver(int n = 1) const;
  // kube-controller-manager and kube-scheduler stopped and started again, with fresh informers: after an
  // API server outage their watches come back with a back-off of up to a minute, and a test that follows
  // must not wait on that (a real control plane's components are restarted with their API server).
  void restart_controllers() const;
  void start_apiserver(int n = 1, const std::string& program = {}) const;
  // Starts a second kube-apiserver on the same etcd (certificates, tokens and keys shared, so both answer
  // every client alike); returns its port on 127.0.0.1. A control plane of two, as behind a load balancer.
  // `program`: another release's kube-apiserver (the skew of a rolling upgrade); once added, it is started
  // again (start_apiserver) rather than added twice.
  [[nodiscard]] int add_apiserver(const std::string& program = {}) const;
  // The release API server `n` reports (its /version's gitVersion), and the program the first one runs.
  [[nodiscard]] std::string apiserver_version(int n = 1) const;
  [[nodiscard]] std::string apiserver_program() const;
  // With K8S_ETCD_MEMBERS=3 in the environment of start(): the member (1-3) leading now, and one member
  // killed (SIGKILL) / started again with its data. Throw on a cluster of one member.
  [[nodiscard]] int etcd_leader() const;
  void stop_etcd(int n) const;
  void start_etcd(int n) const;
  // SIGSTOP / SIGCONT to etcd member `n`: the others go on without it and it falls behind, then catches up.
  void freeze_etcd(int n) const;
  void thaw_etcd(int n) const;
  // The raft index member `n` has applied (its maintenance status).
  [[nodiscard]] std::uint64_t etcd_applied_index(int n) const;
  // SIGSTOP / SIGCONT to kube-apiserver: it keeps its sockets, so requests hang instead of being refused.
  void freeze_apiserver() const;
  void thaw_apiserver() const;

  // Creates ServiceAccount `name` in `ns`, binds it to ClusterRole `cluster_role` (and, if non-empty, the
  // namespaced Role `role` in `ns`), and writes a kubeconfig using its token. Returns the kubeconfig path.
  std::string service_account_kubeconfig(const std::string& ns, const std::string& name,
                                         const std::string& cluster_role, const std::string& role = {}) const;

 private:
  TestCluster() = default;
  std::string kubeconfig_;
  std::string state_dir_;
};

// Polls `pred` every `poll` until it returns true or `timeout_s` passes; returns its last value.
bool eventually(const std::function<bool()>& pred, double timeout_s = 30,
                std::chrono::milliseconds poll = std::chrono::milliseconds(100));
// For a thread that acts at a moment of a run (a SIGTERM once the run got somewhere): long enough for a
// machine loaded many times over, so that it never acts at another moment; a run that never gets there
// fails its checks after this long.
inline constexpr double kPatientSeconds = 300;

}  // namespace dm::test
