// Upstream's exact log lines in the situations that print them: every line of
// tests/fixtures/upstream/log-lines.json checked here must appear as a whole message, character for
// character, in the log of a real run (main path, policy on, guidance on failure, skip, no driver,
// pre-installed host driver).
#include "fixtures/upstream/log_lines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using upstream::log_messages;
using upstream::upstream_text;

class LogLines : public UninstallSuite {};

// The run's log holds upstream line `id` (with `args`) as one whole message.
void expect_line(const DmRun& r, const std::string& id, const std::vector<std::string>& args = {}) {
  const auto msgs = log_messages(r.log);
  const std::string want = upstream_text(id, args);
  EXPECT_TRUE(std::find(msgs.begin(), msgs.end(), want) != msgs.end())
      << "upstream line \"" << id << "\" not printed verbatim: " << want;
}

// Upstream's labels in its read order.
// The run's log holds upstream line `id` with `args` and a last argument of ours (a detail upstream takes
// from the kernel or the API): a whole message that starts with upstream's text up to that argument.
void expect_line_with_detail(const DmRun& r, const std::string& id, std::vector<std::string> args) {
  args.emplace_back("\x01");
  const std::string full = upstream_text(id, args);
  const std::string prefix = full.substr(0, full.find('\x01'));
  const auto msgs = log_messages(r.log);
  EXPECT_TRUE(
      std::any_of(msgs.begin(), msgs.end(),
                  [&](const std::string& m) { return m.size() > prefix.size() && m.rfind(prefix, 0) == 0; }))
      << "upstream line \"" << id << "\" not printed verbatim: " << prefix << "...";
}

const std::vector<std::string> kUpstreamLabels = {"operator-validator",
                                                  "container-toolkit",
                                                  "device-plugin",
                                                  "gpu-feature-discovery",
                                                  "dcgm-exporter",
                                                  "dcgm",
                                                  "mig-manager",
                                                  "nvsm",
                                                  "sandbox-validator",
                                                  "sandbox-device-plugin",
                                                  "vgpu-device-manager",
                                                  "client",
                                                  "dra-driver",
                                                  "dra-validator",
                                                  "dcgm-dra",
                                                  "dcgm-exporter-dra"};

TEST_F(LogLines, MainPathPrintsUpstreamsLines) {
  Scenario s(cluster(), "lines-main");
  auto ops = default_operands();
  ops.push_back({"mig-manager", "nvidia-mig-manager", false, false});
  s.deploy_operands(ops);
  s.deploy_daemonset("client-agent", s.workload_ns(), {{deploy_label("client"), "true"}}, false);
  s.label_node({{deploy_label("client"), "true"}, {"example.com/gpu-agent", "true"}});
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);

  auto r = s.run(sa_kubeconfig(), {{"NODE_LABEL_FOR_GPU_POD_EVICTION", "example.com/gpu-agent"},
                                   {"DRIVER_CONFIG_DIGEST", "new"}});

  ASSERT_EQ(r.exit_code, 0) << r.log;
  const std::string node = "lines-main";
  expect_line(r, "start");
  expect_line(r, "fetching_labels");
  for (const auto& l : kUpstreamLabels) expect_line(r, "getting_label", {deploy_label(l)});
  expect_line(r, "getting_custom_label", {"example.com/gpu-agent"});
  expect_line(r, "current_label", {deploy_label("mig-manager"), "true"});
  expect_line(r, "current_label", {deploy_label("nvsm"), ""});
  expect_line(r, "policy_value", {""});
  expect_line(r, "policy_disabled");
  expect_line(r, "shutting_down");
  expect_line(r, "shutting_down_custom", {"example.com/gpu-agent", "true"});
  for (const char* app : {"nvidia-operator-validator", "nvidia-container-toolkit-daemonset",
                          "nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter",
                          "nvidia-dcgm", "nvidia-dcgm-exporter-dra", "nvidia-dcgm-dra"}) {
    expect_line(r, "wait_app", {app});
  }
  expect_line(r, "wait_mig_manager");
  expect_line(r, "wait_client_key", {deploy_label("client")});
  expect_line(r, "wait_client_key_progress", {"1", deploy_label("client")});
  expect_line(r, "checking_config");
  expect_line(r, "no_state_file");
  expect_line(r, "cordoning", {node});
  expect_line(r, "draining_gpu_pods_dots", {node});
  expect_line(r, "draining_gpu_pods", {node});
  expect_line(r, "identifying_gpu_pods");
  expect_line(r, "deleting_gpu_pods");
  expect_line(r, "cleaning_up_driver");
  expect_line(r, "unloading_modules");
  expect_line(r, "unmounting_root");
  expect_line(r, "uninstalled");
  expect_line(r, "unbinding_vfio");
  expect_line(r, "rescheduling");
  expect_line(r, "uncordoning", {node});
  expect_line(r, "completed");
}

TEST_F(LogLines, PolicyOnPrintsTheSupersededLinesAndUpstreamsGuidance) {
  Scenario s(cluster(), "lines-policy");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.annotate_node("nvidia.com/gpu-driver-upgrade-enabled", "true");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);

  auto r = s.run(sa_kubeconfig(), {{"DRIVER_CONFIG_DIGEST", ""}});

  ASSERT_EQ(r.exit_code, 1) << r.log;
  expect_line(r, "policy_value", {"true"});
  expect_line(r, "eviction_superseded");
  expect_line(r, "auto_drain_superseded");
  expect_line(r, "digest_unset");
  expect_line_with_detail(r, "module_unload_failed", {"nvidia"});
  expect_line(r, "modules_in_use");
  expect_line(r, "uninstall_failed");
  expect_line(r, "cleanup_on_failure");
  expect_line(r, "guidance_policy", {"lines-policy", "lines-policy"});
  expect_line(r, "rescheduling");
}

TEST_F(LogLines, EvictionAndDrainOffPrintUpstreamsOtherGuidance) {
  Scenario s(cluster(), "lines-off");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);

  auto r = s.run(
      sa_kubeconfig(),
      {{"ENABLE_GPU_POD_EVICTION", "false"}, {"ENABLE_AUTO_DRAIN", "false"}, {"FORCE_REINSTALL", "true"}});

  ASSERT_EQ(r.exit_code, 1) << r.log;
  expect_line(r, "force_reinstall");
  expect_line(r, "modules_in_use");
  expect_line(r, "cleanup_on_failure");
  expect_line(r, "guidance_no_eviction", {"lines-off"});
}

TEST_F(LogLines, SkipPathPrintsTheFullSkipSentence) {
  Scenario s(cluster(), "lines-skip");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-same\n");

  auto r = s.run(sa_kubeconfig(), {{"DRIVER_CONFIG_DIGEST", "digest-same"}});

  ASSERT_EQ(r.exit_code, 0) << r.log;
  expect_line(r, "checking_config");
  expect_line(r, "skip");
  expect_line(r, "skip_cleanup");
  expect_line(r, "unmounting_root");
  expect_line(r, "rescheduling");
}

TEST_F(LogLines, NoDriverPathPrintsUpstreamsLines) {
  NodeSimOptions o;
  o.no_driver = true;
  Scenario s(cluster(), "lines-nodrv", o);
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.wait_running(s.operator_ns(), ops.size());

  auto r = s.run(sa_kubeconfig());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  expect_line(r, "no_driver");
  expect_line(r, "unmounting_root");
  expect_line(r, "unbinding_vfio");
  expect_line(r, "rescheduling");
}

TEST_F(LogLines, PreInstalledHostDriverPrintsUpstreamsLines) {
  Scenario s(cluster(), "lines-preinst");
  s.label_node({{deploy_label("driver"), "true"}});
  const std::string smi = s.sim_path("/host/usr/bin/nvidia-smi");
  std::filesystem::create_directories(std::filesystem::path(smi).parent_path());
  write_file(smi, "#!/bin/sh\necho 550.54.15\n");
  ASSERT_EQ(::chmod(smi.c_str(), 0755), 0);

  auto r = s.run(sa_kubeconfig(), {{"PRE_INSTALLED_SLEEP", "1s"}});

  ASSERT_EQ(r.exit_code, 1) << r.log;
  expect_line(r, "start");
  expect_line(r, "host_driver_detected", {"550.54.15"});
  expect_line(r, "pre_installed");
  expect_line(r, "labeling_pre_installed", {"lines-preinst", deploy_label("driver"), "pre-installed"});
}

}  // namespace
}  // namespace dm::test::uninstall
