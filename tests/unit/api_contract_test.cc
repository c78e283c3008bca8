// The kube::Api contract (tests/support/api_contract.h) against the in-memory cluster; the same cases run
// against the real API server in tests/integration/api_contract_real_test.cc.
#include "support/api_contract.h"

#include "support/memory_cluster.h"

namespace dm::test::contract {
namespace {

class MemoryBackend {
 public:
  static void SetUpTestSuite() {}
  static void TearDownTestSuite() {}
  kube::Api& api() { return cluster_; }
  // The in-memory cluster computes a budget's allowance when it is asked.
  void await_budget(const std::string& /*ns*/, const std::string& /*name*/) {}
  void run_daemonset_controller() { cluster_.start_daemonsets(); }
  // It serves the current APIs.
  static bool serves_dra_v1() { return true; }

 private:
  MemoryCluster cluster_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, ApiContract, MemoryBackend);

}  // namespace
}  // namespace dm::test::contract
