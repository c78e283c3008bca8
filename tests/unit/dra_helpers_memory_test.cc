// The DRA driver's helper pods through the in-memory tier (tests/support/memory_scenario.h): a ComputeDomain
// daemon (a DaemonSet selecting the node by its ComputeDomain label, tolerating every taint) and an MPS
// control daemon (a Deployment's pod pinned to the node) hold the GPU beside a workload holding a channel
// claim and one holding an MPS-shared claim. A stand-in for the DRA kubelet plugin takes each helper off as
// the real plugin does (docs/behaviour.md, DRA driver helpers): while the plugin runs and no pod of the node
// holds the claim that needs it any more, it removes the ComputeDomain node label (the DaemonSet stand-in
// then deletes the daemon) and deletes the MPS control daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kube/objects.h"
#include "support/cluster.h"
#include "support/memory_scenario.h"

namespace dm::test {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

const std::string kDomain = "6f1c2e0a-3b1d-4c55-9a1e-0d3c2b1a4f5e";
const std::string kCdLabel = "resource.nvidia.com/computeDomain";
const std::string kCdDaemonSet = "computedomain-daemon-" + kDomain;
const std::string kPluginApp = "nvidia-dra-driver-kubelet-plugin";

// Which helpers the stand-in plugin takes off.
struct PluginStandIn {
  bool removes_domain_label = true;
  bool stops_mps_daemon = true;
};

// The node: the operator's DRA plugin beside the default operands, the two claim holders and the helpers.
struct HelperNode {
  MemoryScenario s;
  std::vector<MemOperand> ops = default_mem_operands();
  std::string mps_app;    // mps-control-daemon-<claim UID>-<5 hex>
  std::string mps_pod;    // its pod's name
  std::string claim_uid;  // the MPS-shared claim's UID
  std::atomic<bool> stop{false};
  std::thread plugin;

  explicit HelperNode(PluginStandIn stand_in) {
    ops.push_back({"dra-driver", kPluginApp, true, false});
    s.add_claim("trainer-channel", "compute-domain.nvidia.com");
    const Json shared = s.add_claim("mps-shared", "gpu.nvidia.com");
    s.add_claim("cd-daemon", "compute-domain.nvidia.com", s.operator_ns());
    claim_uid = kube::uid(shared);
    mps_app = "mps-control-daemon-" + claim_uid + "-4f2a1";
    mps_pod = mps_app + "-7d9f6";
    s.deploy({.operands = ops,
              .pods = {{.name = "trainer", .gpu_claim = "trainer-channel"},
                       {.name = "mps-user", .gpu_claim = "mps-shared"},
                       {.name = mps_pod,
                        .ns = s.operator_ns(),
                        .holds_gpu = true,
                        .labels = {{"app", mps_app}},
                        .container = "mps-control-daemon"}},
              .daemonsets = {{.name = kCdDaemonSet,
                              .ns = s.operator_ns(),
                              .node_selector = {{kCdLabel, kDomain}},
                              .holds_gpu = true,
                              .pod_labels = {{kCdLabel, kDomain}},
                              .tolerations = Json::array({{{"operator", "Exists"}}}),
                              .resource_claims = Json::array({{{"name", "compute-domain-daemon"},
                                                               {"resourceClaimName", "cd-daemon"}}})}}});
    plugin = std::thread([this, stand_in] { run_plugin(stand_in); });
  }
  ~HelperNode() {
    stop = true;
    plugin.join();
  }
  HelperNode(const HelperNode&) = delete;
  HelperNode& operator=(const HelperNode&) = delete;

  // A pod of the node references the claim: the plugin keeps it prepared.
  bool claim_in_use(const std::vector<Json>& pods, const std::string& claim) const {
    return std::any_of(pods.begin(), pods.end(), [&](const Json& p) {
      for (const auto& c : kube::pod_resource_claims(p)) {
        if (kube::resolved_claim_name(p, c) == claim && kube::namespace_of(p) == s.workload_ns()) return true;
      }
      return false;
    });
  }

  void run_plugin(PluginStandIn stand_in) {
    auto api = s.cluster().controller_client();
    while (!stop) {
      const auto pods = s.cluster().objects("/api/v1/pods");
      const bool plugin_runs = std::any_of(pods.begin(), pods.end(), [](const Json& p) {
        return kube::label(p, "app") == kPluginApp && !kube::terminating(p);
      });
      if (plugin_runs) {
        const bool labelled = s.label(kCdLabel) == kDomain;
        if (stand_in.removes_domain_label && labelled && !claim_in_use(pods, "trainer-channel")) {
          (void)api->patch(kube::paths::node(s.node()), kube::PatchType::kMerge,
                           {{"metadata", {{"labels", {{kCdLabel, nullptr}}}}}});
        }
        const bool mps_there = s.cluster().find(kube::paths::pod(s.operator_ns(), mps_pod)).has_value();
        if (stand_in.stops_mps_daemon && mps_there && !claim_in_use(pods, "mps-shared")) {
          (void)api->remove(kube::paths::pod(s.operator_ns(), mps_pod));
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // The helper pods ("ns/name") on the node now.
  std::vector<std::string> helpers() {
    std::vector<std::string> out;
    for (const auto& p : s.cluster().objects(kube::paths::pods(s.operator_ns()))) {
      const std::string name = kube::name(p);
      if (name.rfind(kCdDaemonSet, 0) == 0 || name == mps_pod) out.push_back(s.operator_ns() + "/" + name);
    }
    return out;
  }
};

bool evicted_a_helper(const std::vector<std::string>& evicted) {
  return std::any_of(evicted.begin(), evicted.end(), [](const std::string& e) {
    return e.find("computedomain-daemon-") != std::string::npos ||
           e.find("mps-control-daemon-") != std::string::npos;
  });
}

// Each helper leaves on its own once the workloads holding its claims are gone, while the plugin still runs:
// waited for (never evicted), then the plugin goes and the driver is unloaded.
TEST(DraHelpersMemory, EachHelperLeavesOnItsOwnBeforeThePluginAndTheUnload) {
  HelperNode n({});
  ASSERT_EQ(n.helpers().size(), 2U);

  const auto r = n.s.run(n.s.settings());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(n.s.evicted(), UnorderedElementsAre("workloads/trainer", "workloads/mps-user"));
  EXPECT_FALSE(evicted_a_helper(n.s.evicted())) << "no eviction of a helper was sent";
  EXPECT_EQ(n.s.requests_with("DELETE /api/v1/namespaces/" + n.s.operator_ns() + "/pods/"), 0U) << r.log;
  EXPECT_THAT(r.log, HasSubstr("GPU pod - workloads/trainer")) << "a channel-claim holder is a GPU workload";
  EXPECT_THAT(r.log, HasSubstr(": wait [dra-helper]: ComputeDomain daemon of ComputeDomain " + kDomain));
  EXPECT_THAT(r.log,
              HasSubstr(n.s.operator_ns() + "/" + n.mps_pod + ": wait [dra-helper]: MPS control daemon"));
  const std::vector<std::string> in_order = {
      "evicting pod workloads/trainer",
      "Waiting for the DRA driver's helper pods to leave",
      "The DRA driver's helper pods have left the node",
      "Checking that no pod on the node still holds a GPU resource claim",
      "Draining the DRA kubelet-plugin (last, after its claim-holding clients)",
      "Unloading NVIDIA driver kernel modules",
  };
  size_t at = 0;
  for (const auto& line : in_order) {
    const size_t found = r.log.find(line, at);
    ASSERT_NE(found, std::string::npos) << "\"" << line << "\" missing or out of order:\n" << r.log;
    at = found;
  }
  EXPECT_FALSE(n.s.driver_loaded());
  EXPECT_THAT(n.helpers(), IsEmpty()) << "the workloads are gone, so are their helpers";
  EXPECT_EQ(n.s.label(kCdLabel), "<absent>");
  EXPECT_EQ(n.s.label("nvidia.com/gpu.deploy.dra-driver"), "true") << "the plugin is back";
}

struct StayCase {
  const char* name;
  PluginStandIn stand_in;
  std::function<std::string(const HelperNode&)> expected;  // what the failure names
};

class DraHelperStays : public ::testing::TestWithParam<StayCase> {};

// A helper the plugin does not take off: the run fails before the unload naming it and what keeps it, never
// evicts it, and the node is as before.
TEST_P(DraHelperStays, FailsBeforeTheUnloadNamingWhatKeepsIt) {
  HelperNode n(GetParam().stand_in);
  const auto before = n.s.state();
  auto settings = n.s.settings();
  settings.operand_wait_timeout = std::chrono::seconds(2);

  const auto r = n.s.run(settings);

  EXPECT_EQ(r.exit_code, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("DRA driver helpers did not leave node node-a"));
  EXPECT_THAT(r.log, HasSubstr(GetParam().expected(n))) << r.log;
  EXPECT_THAT(r.log, Not(HasSubstr("Draining the DRA kubelet-plugin"))) << "the plugin stays";
  EXPECT_THAT(r.log, Not(HasSubstr("Unloading NVIDIA driver kernel modules"))) << "no unload was tried";
  EXPECT_FALSE(evicted_a_helper(n.s.evicted())) << r.log;
  EXPECT_TRUE(n.s.driver_loaded());
  auto after = n.s.state();
  if (GetParam().stand_in.removes_domain_label) after.labels[kCdLabel] = kDomain;  // the plugin's, not ours
  EXPECT_EQ(after, before) << r.log;
}

INSTANTIATE_TEST_SUITE_P(EachHelper, DraHelperStays,
                         ::testing::Values(StayCase{"ComputeDomainLabelKept",
                                                    {.removes_domain_label = false},
                                                    [](const HelperNode&) {
                                                      return "(ComputeDomain daemon of ComputeDomain " +
                                                             kDomain + " (DaemonSet/" + kCdDaemonSet +
                                                             ")): kept by the node label " + kCdLabel + "=" +
                                                             kDomain;
                                                    }},
                                           StayCase{"MpsDaemonNotStopped",
                                                    {.stops_mps_daemon = false},
                                                    [](const HelperNode& n) {
                                                      return n.s.operator_ns() + "/" + n.mps_pod +
                                                             " (MPS control daemon of claim " + n.claim_uid +
                                                             " (Deployment/" + n.mps_app +
                                                             ")): kept by claim";
                                                    }}),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace dm::test
