#include "manager/rules/operands.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "fixtures/upstream/log_lines.h"
#include "support/process.h"

namespace dm::manager {

using Json = nlohmann::json;
namespace {

Json fixture(const std::string& name) {
  return Json::parse(test::read_file(test::source_path("tests/fixtures/pods/" + name + ".json")));
}

std::string key(std::string_view suffix) {
  return std::string(kDeployLabelPrefix) + std::string(suffix);
}

std::vector<std::string> apps(const std::vector<OperandWait>& waits) {
  std::vector<std::string> out;
  out.reserve(waits.size());
  for (const auto& w : waits)
    out.push_back(w.kind == WaitKind::kAppLabel ? w.app : "ds:" + w.node_selector_key);
  return out;
}

TEST(OperandsTest, TableHasUpstreamRowsInSnapshotOrder) {
  const auto t = operand_table();
  const std::vector<std::string> expected = {"operator-validator",
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
  ASSERT_EQ(t.size(), expected.size());
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i].label_key, key(expected[i]));
  // The custom key is one more row, last.
  const auto with_custom = operand_table("example.com/gpu-agent");
  ASSERT_EQ(with_custom.size(), expected.size() + 1);
  EXPECT_EQ(with_custom.back().label_key, "example.com/gpu-agent");
  EXPECT_EQ(with_custom.back().wait_kind, WaitKind::kDaemonSetNodeSelectorKey);
}

TEST(OperandsTest, SnapshotReadsEveryTableKeyAndTheAnnotationFromOneNode) {
  const auto t = operand_table("example.com/gpu-agent");
  const Snapshot s = take_snapshot(fixture("node-mixed"), t);
  EXPECT_EQ(s.labels.size(), t.size());
  EXPECT_EQ(s.value(key("operator-validator")), "true");
  EXPECT_EQ(s.value(key("device-plugin")), "paused-for-driver-upgrade");
  EXPECT_EQ(s.value(key("client")), "true");
  EXPECT_EQ(s.value(key("dra-driver")), "");
  EXPECT_EQ(s.value("example.com/gpu-agent"), "on");
  EXPECT_EQ(s.value(key("driver")), "");  // not an operand row: never in the snapshot
  EXPECT_TRUE(s.policy_enabled());
  EXPECT_FALSE(s.dra_on());

  const Snapshot dra = take_snapshot(fixture("node-dra"), t);
  EXPECT_FALSE(dra.policy_enabled());  // annotation "false"
  EXPECT_TRUE(dra.dra_on());

  const Snapshot bare = take_snapshot(fixture("node-bare"), t);
  EXPECT_EQ(bare.labels.size(), t.size());
  EXPECT_EQ(bare.value(key("device-plugin")), "");
  EXPECT_FALSE(bare.policy_enabled());
}

TEST(OperandsTest, PausePatchWritesOnlyNonEmptySnapshotsOfThePauseBatch) {
  const auto t = operand_table("example.com/gpu-agent");
  const Snapshot s = take_snapshot(fixture("node-mixed"), t);
  const Json expected = Json::parse(R"({"metadata":{"labels":{
      "nvidia.com/gpu.deploy.operator-validator":"paused-for-driver-upgrade",
      "nvidia.com/gpu.deploy.container-toolkit":"paused-for-driver-upgrade",
      "nvidia.com/gpu.deploy.device-plugin":"paused-for-driver-upgrade",
      "nvidia.com/gpu.deploy.gpu-feature-discovery":"on_paused-for-driver-upgrade",
      "nvidia.com/gpu.deploy.dcgm-exporter":"false",
      "nvidia.com/gpu.deploy.dcgm":"_foo__paused-for-driver-upgrade",
      "nvidia.com/gpu.deploy.mig-manager":"paused-for-driver-upgrade",
      "nvidia.com/gpu.deploy.client":"paused-for-driver-upgrade",
      "example.com/gpu-agent":"on_paused-for-driver-upgrade"}}})");
  EXPECT_EQ(pause_patch(s, t), expected);
  // No DRA on this node: nothing for the plugin batch.
  EXPECT_FALSE(patch_has_labels(plugin_patch(s, t)));
}

TEST(OperandsTest, RestorePatchWritesBackSnapshotValuesHealingCrashedPauses) {
  const auto t = operand_table("example.com/gpu-agent");
  const Snapshot s = take_snapshot(fixture("node-mixed"), t);
  const Json expected = Json::parse(R"({"metadata":{"labels":{
      "nvidia.com/gpu.deploy.operator-validator":"true",
      "nvidia.com/gpu.deploy.container-toolkit":"true",
      "nvidia.com/gpu.deploy.device-plugin":"true",
      "nvidia.com/gpu.deploy.gpu-feature-discovery":"on",
      "nvidia.com/gpu.deploy.dcgm-exporter":"false",
      "nvidia.com/gpu.deploy.dcgm":"_foo_",
      "nvidia.com/gpu.deploy.mig-manager":"true",
      "nvidia.com/gpu.deploy.client":"true",
      "example.com/gpu-agent":"on"}}})");
  EXPECT_EQ(restore_patch(s, t), expected);
}

TEST(OperandsTest, RestoreLeavesAloneLabelsChangedDuringTheRun) {
  const auto t = operand_table();
  Json node = {{"metadata",
                {{"labels",
                  {{key("device-plugin"), "true"},
                   {key("dcgm-exporter"), "true"},
                   {key("dcgm"), "true"},
                   {key("container-toolkit"), "true"}}}}}};
  const Snapshot s = take_snapshot(node, t);
  // During the run: device-plugin still paused by us, an admin turned dcgm-exporter off and deleted dcgm,
  // container-toolkit is already back at its value.
  node["metadata"]["labels"] = {{key("device-plugin"), "paused-for-driver-upgrade"},
                                {key("dcgm-exporter"), "false"},
                                {key("container-toolkit"), "true"}};
  const RestoreDecision plan = restore_patch_if_unchanged(s, t, node);
  EXPECT_EQ(plan.patch,
            Json::parse(R"({"metadata":{"labels":{"nvidia.com/gpu.deploy.device-plugin":"true"}}})"));
  const std::vector<std::pair<std::string, std::string>> others = {{key("dcgm"), ""},
                                                                   {key("dcgm-exporter"), "false"}};
  EXPECT_EQ(plan.changed_by_others, others);
}

TEST(OperandsTest, RestoreRemovesTheEmptyOperandLabelsStillEmpty) {
  const auto t = operand_table("example.com/gpu-agent");
  Json node = {{"metadata",
                {{"labels",
                  {{key("device-plugin"), "true"},
                   {key("nvsm"), ""},
                   {key("sandbox-validator"), ""},
                   {key("dra-validator"), ""},
                   {"example.com/gpu-agent", ""}}}}}};
  const Snapshot s = take_snapshot(node, t);
  EXPECT_EQ(empty_operand_labels(s, t),
            (std::vector<std::string>{key("nvsm"), key("sandbox-validator"), key("dra-validator")}))
      << "operand keys only, in table order; not the custom key";
  // During the run someone set sandbox-validator; device-plugin is still paused by us.
  node["metadata"]["labels"][key("device-plugin")] = "paused-for-driver-upgrade";
  node["metadata"]["labels"][key("sandbox-validator")] = "true";
  const RestoreDecision plan = restore_patch_if_unchanged(s, t, node);
  EXPECT_EQ(plan.patch, Json::parse(R"({"metadata":{"labels":{"nvidia.com/gpu.deploy.device-plugin":"true",
      "nvidia.com/gpu.deploy.nvsm":null,"nvidia.com/gpu.deploy.dra-validator":null}}})"));
  EXPECT_EQ(plan.removed_empty, (std::vector<std::string>{key("nvsm"), key("dra-validator")}));
  EXPECT_TRUE(plan.changed_by_others.empty());
}

TEST(OperandsTest, RestoreHealsALabelLeftPausedByACrashedRun) {
  const auto t = operand_table();
  const Json node = {{"metadata", {{"labels", {{key("device-plugin"), "paused-for-driver-upgrade"}}}}}};
  const RestoreDecision plan = restore_patch_if_unchanged(take_snapshot(node, t), t, node);
  EXPECT_EQ(plan.patch,
            Json::parse(R"({"metadata":{"labels":{"nvidia.com/gpu.deploy.device-plugin":"true"}}})"));
  EXPECT_TRUE(plan.changed_by_others.empty());
}

TEST(OperandsTest, DraNodeHasPluginBatchAndRestoresIt) {
  const auto t = operand_table();
  const Snapshot s = take_snapshot(fixture("node-dra"), t);
  const Json pause = pause_patch(s, t);
  EXPECT_FALSE(pause["metadata"]["labels"].contains(std::string(kDraDriverLabel)));
  EXPECT_EQ(pause["metadata"]["labels"][key("dra-validator")], "paused-for-driver-upgrade");
  EXPECT_EQ(pause["metadata"]["labels"][key("sandbox-validator")], "pre-installed_paused-for-driver-upgrade");
  EXPECT_EQ(plugin_patch(s, t), Json::parse(R"({"metadata":{"labels":{
      "nvidia.com/gpu.deploy.dra-driver":"paused-for-driver-upgrade"}}})"));
  const Json restore = restore_patch(s, t);
  EXPECT_EQ(restore["metadata"]["labels"][std::string(kDraDriverLabel)], "true");
  EXPECT_EQ(restore["metadata"]["labels"][key("sandbox-validator")], "pre-installed");
  EXPECT_EQ(restore["metadata"]["labels"].size(), 7U);
}

TEST(OperandsTest, BareNodeWritesNothing) {
  const auto t = operand_table("example.com/gpu-agent");
  const Snapshot s = take_snapshot(fixture("node-bare"), t);
  EXPECT_FALSE(patch_has_labels(pause_patch(s, t)));
  EXPECT_FALSE(patch_has_labels(plugin_patch(s, t)));
  EXPECT_FALSE(patch_has_labels(restore_patch(s, t)));
  EXPECT_FALSE(patch_has_labels(Json::object()));
}

TEST(OperandsTest, WaitsFollowUpstreamOrderAndConditions) {
  const auto t = operand_table("example.com/gpu-agent");
  // Mixed node: mig-manager and client set, sandbox/vgpu not, custom key set.
  const Snapshot s = take_snapshot(fixture("node-mixed"), t);
  const std::vector<std::string> expected = {"nvidia-operator-validator",
                                             "nvidia-container-toolkit-daemonset",
                                             "nvidia-device-plugin-daemonset",
                                             "gpu-feature-discovery",
                                             "nvidia-dcgm-exporter",
                                             "nvidia-dcgm",
                                             "nvidia-dcgm-exporter-dra",
                                             "nvidia-dcgm-dra",
                                             "nvidia-mig-manager",
                                             "ds:nvidia.com/gpu.deploy.client",
                                             "ds:example.com/gpu-agent"};
  EXPECT_EQ(apps(pause_waits(s, t)), expected);
  EXPECT_TRUE(plugin_waits(s, t).empty());

  // Bare node: the eight unconditional waits only (upstream waits for them even with empty labels).
  const Snapshot bare = take_snapshot(fixture("node-bare"), t);
  EXPECT_EQ(apps(pause_waits(bare, t)), std::vector<std::string>(expected.begin(), expected.begin() + 8));

  // DRA node: sandbox-validator set => waited for; the plugin wait comes from the plugin batch.
  const Snapshot dra = take_snapshot(fixture("node-dra"), t);
  const auto w = apps(pause_waits(dra, t));
  EXPECT_NE(std::find(w.begin(), w.end(), "nvidia-sandbox-validator"), w.end());
  const auto pw = plugin_waits(dra, t);
  ASSERT_EQ(pw.size(), 1U);
  EXPECT_EQ(pw[0].label_selector(), "app=nvidia-dra-driver-kubelet-plugin");
  EXPECT_EQ(pw[0].description(), "dra-driver");
}

TEST(OperandsTest, WaitDescriptions) {
  OperandWait w;
  w.kind = WaitKind::kDaemonSetNodeSelectorKey;
  w.node_selector_key = std::string(kClientLabel);
  EXPECT_EQ(w.label_selector(), "");
  EXPECT_EQ(w.description(), "daemon set pods with nodeSelector key nvidia.com/gpu.deploy.client");
}

// The node before and after the pause, as the client and custom keys' waits decide which DaemonSet pods the
// pause takes off: labels left paused by a crashed run count at their restored value, other labels as they
// are, and only the keys that are waited for are named.
TEST(OperandsTest, LabelPauseIsTheNodeBeforeAndAfterThePauseBatch) {
  const auto t = operand_table("example.com/gpu-agent");
  const Json node = Json::parse(R"({"metadata": {"name": "gpu-node-1", "labels": {
      "nvidia.com/gpu.deploy.client": "paused-for-driver-upgrade",
      "nvidia.com/gpu.deploy.device-plugin": "true",
      "nvidia.com/gpu.deploy.dra-driver": "true",
      "example.com/gpu-agent": "on",
      "kubernetes.io/os": "linux"}}})");
  const LabelPause p = label_pause(take_snapshot(node, t), t);
  EXPECT_EQ(p.before.name, "gpu-node-1");
  EXPECT_EQ(p.before.labels.at("nvidia.com/gpu.deploy.client"), "true");
  EXPECT_EQ(p.after.labels.at("nvidia.com/gpu.deploy.client"), "paused-for-driver-upgrade");
  EXPECT_EQ(p.after.labels.at("nvidia.com/gpu.deploy.device-plugin"), "paused-for-driver-upgrade");
  EXPECT_EQ(p.after.labels.at("example.com/gpu-agent"), "on_paused-for-driver-upgrade");
  EXPECT_EQ(p.after.labels.at("nvidia.com/gpu.deploy.dra-driver"), "true") << "paused in a later batch";
  EXPECT_EQ(p.after.labels.at("kubernetes.io/os"), "linux");
  EXPECT_FALSE(p.after.labels.contains("nvidia.com/gpu.deploy.dcgm")) << "an absent label stays absent";
  EXPECT_EQ(p.keys, (std::vector<std::string>{"nvidia.com/gpu.deploy.client", "example.com/gpu-agent"}));
  const auto waits = pause_waits(take_snapshot(node, t), t);
  EXPECT_EQ(waits.back().node_selector_key, "example.com/gpu-agent");
  ASSERT_TRUE(waits.back().pause);
  EXPECT_EQ(waits.back().pause->after.labels, p.after.labels);
}

// Every wait prints upstream's own start and failure lines: app label for the always-waited operands,
// upstream's short name for the optional ones, its own sentence for the client key's DaemonSet pods.
TEST(OperandsTest, WaitLinesAreUpstreams) {
  using test::upstream::upstream_text;
  const auto t = operand_table("");
  Snapshot s;
  for (const auto& op : t) s.labels[op.label_key] = "true";
  std::vector<OperandWait> waits = pause_waits(s, t);
  for (const auto& w : plugin_waits(s, t)) waits.push_back(w);
  using Args = std::vector<std::string>;
  using Lines = std::pair<std::string, std::string>;
  std::map<std::string, Lines> expected;  // app or key -> start, failure
  for (const char* app : {"nvidia-operator-validator", "nvidia-container-toolkit-daemonset",
                          "nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter",
                          "nvidia-dcgm", "nvidia-dcgm-exporter-dra", "nvidia-dcgm-dra"}) {
    expected[app] =
        Lines(upstream_text("wait_app", Args{app}), upstream_text("wait_app_failed", Args{app, "boom"}));
  }
  const std::vector<std::pair<const char*, const char*>> optional = {
      {"nvidia-mig-manager", "wait_mig_manager"},
      {"nvidia-sandbox-validator", "wait_sandbox_validator"},
      {"nvidia-sandbox-device-plugin-daemonset", "wait_sandbox_device_plugin"},
      {"nvidia-vgpu-device-manager", "wait_vgpu_device_manager"},
      {"nvidia-dra-driver-kubelet-plugin", "wait_dra_driver"}};
  for (const auto& [app, id] : optional) {
    expected[app] = Lines(upstream_text(id), upstream_text(std::string(id) + "_failed", Args{"boom"}));
  }
  expected[std::string(kClientLabel)] =
      Lines(upstream_text("wait_client_key", Args{std::string(kClientLabel)}),
            upstream_text("wait_client_key_failed", Args{"boom"}));
  ASSERT_EQ(waits.size(), expected.size());
  for (const auto& w : waits) {
    const std::string key = w.kind == WaitKind::kAppLabel ? w.app : w.node_selector_key;
    ASSERT_EQ(expected.count(key), 1U) << key;
    EXPECT_EQ(w.start_line(), expected[key].first);
    EXPECT_EQ(w.failure_line("boom"), expected[key].second);
  }
}

}  // namespace
}  // namespace dm::manager
