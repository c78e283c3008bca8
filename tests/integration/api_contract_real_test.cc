// The kube::Api contract (tests/support/api_contract.h) against a real control plane (scripts/cluster), as
// its admin through kube::Client: the answers the in-memory cluster of the unit tier must give.
#include <memory>

#include "kube/client.h"
#include "kube/config.h"
#include "support/api_contract.h"

namespace dm::test::contract {
namespace {

class RealBackend {
 public:
  static void SetUpTestSuite() { cluster_ = TestCluster::start(); }
  static void TearDownTestSuite() { cluster_.reset(); }

  RealBackend() {
    auto config = kube::load_config(cluster_->kubeconfig());
    if (!config) throw std::runtime_error(config.error().message);
    kube::ClientOptions o;
    o.retry_for = std::chrono::seconds(2);
    auto c = kube::Client::create(*config, o);
    if (!c) throw std::runtime_error(c.error().message);
    client_ = std::move(*c);
  }
  kube::Api& api() { return *client_; }
  // The control plane's controller-manager runs it.
  void run_daemonset_controller() {}
  // Kubernetes 1.34 and later (scripts/k8s-matrix runs older releases too).
  static bool serves_dra_v1() { return cluster_->serves("resource.k8s.io/v1"); }
  // The disruption controller has seen the budget and its pod.
  void await_budget(const std::string& ns, const std::string& name) {
    const bool processed = eventually([&] {
      auto pdb = client_->get("/apis/policy/v1/namespaces/" + ns + "/poddisruptionbudgets/" + name);
      if (!pdb || !pdb->contains("status")) return false;
      const auto& st = (*pdb)["status"];
      return st.value("observedGeneration", 0) >= (*pdb)["metadata"].value("generation", 1) &&
             st.value("expectedPods", 0) >= 1;
    });
    EXPECT_TRUE(processed) << "the disruption controller did not process budget " << name;
  }

 private:
  inline static std::unique_ptr<TestCluster> cluster_;
  std::unique_ptr<kube::Client> client_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Real, ApiContract, RealBackend);

}  // namespace
}  // namespace dm::test::contract
