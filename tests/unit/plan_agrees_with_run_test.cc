// `plan` and the run decide the same path from the same node: for each path, the plan is read from the
// in-memory cluster and the simulated host (read_plan_inputs, build_plan), then the run goes on the same node
// (tests/support/memory_scenario.h), and the path the run took and the phases it entered are the plan's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <sstream>

#include "host/host.h"
#include "manager/plan/build.h"
#include "manager/plan/read.h"
#include "manager/plan/render.h"
#include "support/memory_scenario.h"
#include "support/process.h"

namespace dm::test {
namespace {

using manager::Phase;
using manager::RunPath;

// The path a run took, by the line it ends with (docs/behaviour.md, The paths); nullopt: none of them.
std::optional<RunPath> path_of_run(const MemRun& r) {
  const auto has = [&](const std::string& line) { return r.log.find(line) != std::string::npos; };
  if (has("driver is pre-installed on host")) return RunPath::kPreInstalled;
  if (has("refusing to start")) return RunPath::kRefused;
  if (has("Node prepared for the driver installation (no driver was loaded)")) return RunPath::kNoDriver;
  if (has("Node prepared for the driver installation (driver kept)")) return RunPath::kSkip;
  if (has("Driver uninstallation completed successfully")) return RunPath::kFull;
  return std::nullopt;
}

// The phases the run entered, in order ("debug Phase <name>" lines).
std::vector<std::string> phases_of_run(const MemRun& r) {
  std::vector<std::string> out;
  std::istringstream lines(r.log);
  const std::string mark = "debug Phase ";
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(mark)) out.push_back(line.substr(mark.size()));
  }
  return out;
}

struct AgreeCase {
  std::string name;
  RunPath path;
  // Puts the node in the state of the path; may change the settings.
  std::function<void(MemoryScenario& s, manager::Settings& settings)> arrange;
  bool driver = true;  // the simulated nvidia module is loaded
};

void PrintTo(const AgreeCase& c, std::ostream* os) {
  *os << c.name;
}

class PlanAgreesWithRun : public ::testing::TestWithParam<AgreeCase> {};

TEST_P(PlanAgreesWithRun, OnThePathAndItsPhases) {
  const AgreeCase& c = GetParam();
  MemoryScenario s("node-a", c.driver);
  auto settings = s.settings();
  c.arrange(s, settings);

  auto host = host::make_host(settings.sim_root);
  auto inputs = manager::read_plan_inputs(settings, s.cluster(), *host);
  ASSERT_TRUE(inputs) << inputs.error().message;
  const manager::Plan plan = manager::build_plan(settings, *inputs);
  const auto r = s.run(settings);

  EXPECT_EQ(plan.flow.path, c.path) << manager::render_plan_text(plan);
  const auto took = path_of_run(r);
  ASSERT_TRUE(took.has_value()) << r.log;
  EXPECT_EQ(manager::path_name(*took), manager::path_name(plan.flow.path)) << r.log;
  // The steps the facts decide beyond the path: the GPU-workload eviction and the DRA claim guard.
  const auto logged = [&](const std::string& line) { return r.log.find(line) != std::string::npos; };
  EXPECT_EQ(plan.flow.evict_workloads, logged("Draining node node-a of any GPU pods")) << r.log;
  const bool guard = std::ranges::any_of(plan.flow.steps, [](const manager::PlannedStep& p) {
    return p.step == manager::Step::kCheckDraClaims;
  });
  EXPECT_EQ(guard, logged("Checking that no pod on the node still holds a GPU resource claim")) << r.log;
  // Every phase the run entered is one of the plan's, in the plan's order (a phase whose steps have nothing
  // to do at run time may be passed over).
  std::vector<std::string> planned;
  for (Phase p : plan.flow.phases()) planned.emplace_back(manager::phase_name(p));
  size_t at = 0;
  for (const auto& entered : phases_of_run(r)) {
    while (at < planned.size() && planned[at] != entered) ++at;
    ASSERT_LT(at, planned.size()) << "the run entered " << entered << ", not a phase of the plan in order: "
                                  << ::testing::PrintToString(planned) << "\n"
                                  << r.log;
  }
}

void write_executable(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  write_file(path, text);
  ASSERT_EQ(::chmod(path.c_str(), 0755), 0);
}

std::vector<AgreeCase> cases() {
  const MemPod trainer{.name = "trainer", .request_gpu = true};
  return {
      {.name = "Full",
       .path = RunPath::kFull,
       .arrange = [trainer](MemoryScenario& s, manager::Settings&) { s.deploy({.pods = {trainer}}); }},
      {.name = "FullWithClientsAndTheFallback",
       .path = RunPath::kFull,
       .arrange =
           [trainer](MemoryScenario& s, manager::Settings& settings) {
             s.deploy({.pods = {trainer, {.name = "agent", .gpu_client = "true"}}});
             settings.enable_auto_drain = true;
           }},
      {.name = "UpgradePolicyOn",
       .path = RunPath::kFull,
       .arrange =
           [](MemoryScenario& s, manager::Settings&) {
             s.deploy({});
             s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");
           }},
      {.name = "Skip",
       .path = RunPath::kSkip,
       .arrange =
           [trainer](MemoryScenario& s, manager::Settings& settings) {
             s.deploy({.pods = {trainer}});
             write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-same\n");
             settings.driver_config_digest = "digest-same";
           }},
      {.name = "NoDriver",
       .path = RunPath::kNoDriver,
       .arrange = [trainer](MemoryScenario& s, manager::Settings&) { s.deploy({.pods = {trainer}}); },
       .driver = false},
      {.name = "DraByTheDriversOwnChart",
       .path = RunPath::kFull,
       .arrange =
           [](MemoryScenario& s, manager::Settings&) {
             s.add_gpu_claim("claimer-gpu");
             s.cluster().apply(
                 {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceSlice"},
                  {"metadata", {{"name", "node-a-gpu.nvidia.com-x"}}},
                  {"spec",
                   {{"driver", "gpu.nvidia.com"}, {"nodeName", "node-a"}, {"pool", {{"name", "node-a"}}}}}});
             s.deploy({.pods = {{.name = "claimer", .gpu_claim = "claimer-gpu"}}});
           }},
      {.name = "PreInstalled",
       .path = RunPath::kPreInstalled,
       .arrange =
           [](MemoryScenario& s, manager::Settings&) {
             s.deploy({});
             write_executable(s.sim_path("/host/usr/bin/nvidia-smi"), "#!/bin/sh\necho 550.54.15\n");
           }},
      {.name = "RefusedForAnOwnPodNotToleratingTheTaint",
       .path = RunPath::kRefused,
       .arrange =
           [](MemoryScenario& s, manager::Settings& settings) {
             s.deploy({.pods = {{.name = "agent", .gpu_client = "true"}}});
             settings.gpu_client_taint = "example.com/gpu-maintenance=driver:NoSchedule";
             s.cluster().apply({{"apiVersion", "v1"},
                                {"kind", "Pod"},
                                {"metadata", {{"name", "driver-pod"}, {"namespace", s.operator_ns()}}},
                                {"spec",
                                 {{"nodeName", "no-such-node"},
                                  {"containers", nlohmann::json::array(
                                                     {{{"name", "k8s-driver-manager"}, {"image", "x"}}})}}}});
             settings.pod_name = "driver-pod";
             settings.pod_namespace = s.operator_ns();
           }},
  };
}

INSTANTIATE_TEST_SUITE_P(EachPath, PlanAgreesWithRun, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<AgreeCase>& p) { return p.param.name; });

}  // namespace
}  // namespace dm::test
