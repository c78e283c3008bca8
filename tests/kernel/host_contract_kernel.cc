// The host seam's contract (tests/support/host_contract.h) against a real Linux kernel and the NVIDIA stub
// modules, inside the test guest: ctest `kernel.host_contract` runs this binary there with
// `tests/kernel/guest run`. make_host("") is the Host under test: the real host layer, no simulation. Every
// case runs in the one guest, in the suite's order (docs/host-contract.md).
#include <sys/utsname.h>

#include <iostream>

#include "support/host_contract.h"

namespace dm::test::host_contract {
namespace {

class KernelBackend {
 public:
  static void SetUpTestSuite() {
    struct utsname u {};
    ::uname(&u);
    std::cout << "host contract against kernel " << u.release << " (" << u.machine << ")\n";
  }
  static std::unique_ptr<HostScenario> make() { return make_kernel_scenario(); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Kernel, HostContract, KernelBackend);

}  // namespace
}  // namespace dm::test::host_contract
