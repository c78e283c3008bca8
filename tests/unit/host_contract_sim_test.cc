// The host seam's contract (tests/support/host_contract.h) against the simulated host of
// docs/simulated-host.md; the same cases run against a real kernel in tests/kernel/host_contract_kernel.cc.
// Needs root (mknod, mount, a private mount namespace per case's process).
#include "support/host_contract.h"

namespace dm::test::host_contract {
namespace {

class SimBackend {
 public:
  static void SetUpTestSuite() {}
  static std::unique_ptr<HostScenario> make() { return make_sim_scenario(); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Sim, HostContract, SimBackend);

}  // namespace
}  // namespace dm::test::host_contract
