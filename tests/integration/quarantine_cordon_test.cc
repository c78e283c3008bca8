// Another controller's quarantine on a real control plane + node-sim, with the driver-manager binary as a
// least-privilege service account: while the run has DCGM paused, a stand-in for NVSentinel's fault
// quarantine (tests/support/quarantine_standin.h, as the cluster's admin) marks the node - the cordon is
// already on from the run - and the run completes, unloads the driver, restores its labels and leaves the
// cordon, saying why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "fixtures/uninstall/fixture.h"
#include "kube/client.h"
#include "kube/config.h"
#include "support/quarantine_standin.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class Quarantine : public UninstallSuite {
 protected:
  // The stand-in's own connection, as the cluster's admin (NVSentinel's service account may patch nodes).
  static std::unique_ptr<kube::Client> admin_client() {
    auto config = kube::load_config(cluster().kubeconfig());
    if (!config) throw std::runtime_error(config.error().message);
    kube::ClientOptions o;
    o.retry_for = std::chrono::seconds(2);
    auto c = kube::Client::create(*config, o);
    if (!c) throw std::runtime_error(c.error().message);
    return std::move(*c);
  }
};

TEST_F(Quarantine, NvsentinelsQuarantineDuringTheRunKeepsTheCordonWhileTheRestIsRestored) {
  Scenario s(cluster(), "quarantined");
  auto ops = default_operands();
  ops.push_back({"dcgm", "nvidia-dcgm", false, /*stuck=*/true});  // the stand-in finishes its termination
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  const auto api = admin_client();
  QuarantineStandIn nvsentinel(*api, {.node = s.node(), .ns = s.operator_ns()});

  auto r = s.run(sa_kubeconfig(), {{"OPERAND_WAIT_TIMEOUT", "300s"}});

  ASSERT_EQ(r.exit_code, 0) << r.log;
  ASSERT_TRUE(nvsentinel.quarantined()) << nvsentinel.error() << r.log;
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "the driver was unloaded";
  EXPECT_THAT(r.log, HasSubstr("Cordoning node quarantined"));
  EXPECT_THAT(r.log, HasSubstr("Leaving node quarantined cordoned: it is under NVSentinel's fault quarantine "
                               "(annotation quarantineHealthEvent="));
  EXPECT_THAT(r.log, Not(HasSubstr("Uncordoning node")));
  EXPECT_THAT(r.log, HasSubstr("; left on the node: the cordon, under NVSentinel's fault quarantine"));
  EXPECT_TRUE(s.unschedulable());
  EXPECT_TRUE(s.has_annotation(kNvsQuarantineAnnotation));
  EXPECT_EQ(s.label(kNvsStateLabel), "quarantined");
  EXPECT_TRUE(s.has_annotation("nvidia.com/gpu-driver-manager.cordoned")) << "a later undo lifts it";
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
  EXPECT_FALSE(s.has_annotation("nvidia.com/gpu-driver-manager.paused-labels"));
  EXPECT_FALSE(s.has_annotation("nvidia.com/gpu-driver-manager.lease"));
  const auto events = cluster().get_json({"events", "-n", "default", "--field-selector",
                                          "involvedObject.kind=Node,involvedObject.name=quarantined"});
  bool recorded = false;
  for (const auto& e : events["items"]) {
    recorded =
        recorded || (e.value("reason", "") == "CordonKept" &&
                     e.value("message", "").find("NVSentinel's fault quarantine") != std::string::npos);
  }
  EXPECT_TRUE(recorded) << events.dump(2);
}

}  // namespace
}  // namespace dm::test::uninstall
