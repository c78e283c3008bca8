#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "kube/node_affinity.h"
#include "kube/objects.h"
#include "support/process.h"

namespace dm::kube {

using Json = nlohmann::json;
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

const Json kPod = Json::parse(R"({
  "kind": "Pod", "apiVersion": "v1",
  "metadata": {
    "name": "dra-plugin-x", "namespace": "nvidia-dra", "uid": "u-1", "resourceVersion": "42",
    "labels": {"app": "dra", "tier": "gpu"},
    "annotations": {"nvidia.com/gpu.client": "true", "kubernetes.io/config.mirror": "abc"},
    "ownerReferences": [
      {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c-0"},
      {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dra", "uid": "d-1", "controller": true}
    ]
  },
  "spec": {
    "nodeName": "gpu-node-1",
    "nodeSelector": {"nvidia.com/gpu.deploy.client": "true"},
    "terminationGracePeriodSeconds": 45,
    "tolerations": [
      {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
      {"key": "k", "value": "v", "tolerationSeconds": 5}
    ],
    "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/mig-1g.5gb": 1}}}],
    "containers": [
      {"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}},
      {"name": "b"}
    ],
    "resourceClaims": [
      {"name": "direct", "resourceClaimName": "claim-a"},
      {"name": "old-form", "source": {"resourceClaimName": "claim-b"}},
      {"name": "templated", "resourceClaimTemplateName": "tmpl"},
      {"name": "pending", "source": {"resourceClaimTemplateName": "tmpl2"}}
    ]
  },
  "status": {
    "phase": "Running",
    "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
    "resourceClaimStatuses": [{"name": "templated", "resourceClaimName": "dra-plugin-x-templated-q7x"}]
  }
})");

TEST(ObjectsTest, Metadata) {
  EXPECT_EQ(name(kPod), "dra-plugin-x");
  EXPECT_EQ(namespace_of(kPod), "nvidia-dra");
  EXPECT_EQ(uid(kPod), "u-1");
  EXPECT_EQ(resource_version(kPod), "42");
  EXPECT_EQ(ref_string(kPod), "nvidia-dra/dra-plugin-x");
  EXPECT_THAT(labels(kPod), ElementsAre(Pair("app", "dra"), Pair("tier", "gpu")));
  EXPECT_EQ(label(kPod, "app"), "dra");
  EXPECT_EQ(label(kPod, "nope"), std::nullopt);
  EXPECT_EQ(annotation(kPod, "nvidia.com/gpu.client"), "true");
  EXPECT_EQ(annotations(kPod).size(), 2U);
  EXPECT_FALSE(terminating(kPod));
}

TEST(ObjectsTest, Owners) {
  const auto refs = owner_refs(kPod);
  ASSERT_EQ(refs.size(), 2U);
  EXPECT_FALSE(refs[0].controller);
  const auto c = controller_ref(kPod);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->kind, "DaemonSet");
  EXPECT_EQ(c->name, "dra");
  EXPECT_EQ(c->uid, "d-1");
  EXPECT_EQ(c->api_version, "apps/v1");
  EXPECT_EQ(controller_ref(Json::object()), std::nullopt);
}

TEST(ObjectsTest, PodFields) {
  EXPECT_EQ(pod_node_name(kPod), "gpu-node-1");
  EXPECT_EQ(pod_phase(kPod), "Running");
  EXPECT_FALSE(pod_finished(kPod));
  EXPECT_TRUE(pod_ready(kPod));
  EXPECT_TRUE(pod_is_mirror(kPod));
  EXPECT_EQ(pod_grace_period_seconds(kPod), 45);
  EXPECT_THAT(pod_node_selector(kPod), ElementsAre(Pair("nvidia.com/gpu.deploy.client", "true")));
  // Regular containers only: the init container's MIG limit is not listed.
  const auto res = pod_container_resources(kPod);
  ASSERT_EQ(res.size(), 3U);
  EXPECT_EQ(res[0].container, "a");
  EXPECT_EQ(res[0].name, "cpu");
  EXPECT_EQ(res[0].quantity, "1");
  EXPECT_EQ(res[1].name, "nvidia.com/gpu");
  EXPECT_EQ(res[1].quantity, "1");  // a number, rendered as text
  EXPECT_EQ(res[2].name, "nvidia.com/gpu");
  const auto tols = pod_tolerations(kPod);
  ASSERT_EQ(tols.size(), 2U);
  EXPECT_EQ(tols[0].op, "Exists");
  EXPECT_EQ(tols[1].op, "Equal");  // the default
  EXPECT_EQ(tols[1].toleration_seconds, 5);
}

TEST(ObjectsTest, DefaultsForAnEmptyPod) {
  const Json pod = Json::parse(R"({"metadata": {"name": "p"}})");
  EXPECT_EQ(pod_phase(pod), "Pending");
  EXPECT_FALSE(pod_ready(pod));
  EXPECT_FALSE(pod_is_mirror(pod));
  EXPECT_EQ(pod_grace_period_seconds(pod), 30);
  EXPECT_TRUE(pod_container_resources(pod).empty());
  EXPECT_FALSE(pod_declares_gpu_resource(pod));
  EXPECT_FALSE(pod_is_allocated_gpu(pod));
  EXPECT_FALSE(pod_has_emptydir_volume(pod));
  EXPECT_FALSE(controlled_by_kind(pod, "DaemonSet"));
  EXPECT_TRUE(pod_resource_claims(pod).empty());
  EXPECT_EQ(ref_string(pod), "p");
}

TEST(ObjectsTest, ControllerKindAndEmptyDir) {
  EXPECT_TRUE(controlled_by_kind(kPod, "DaemonSet"));
  EXPECT_FALSE(controlled_by_kind(kPod, "ConfigMap"));  // an owner, but not the controller
  Json pod = kPod;
  EXPECT_FALSE(pod_has_emptydir_volume(pod));
  pod["spec"]["volumes"] = Json::parse(R"([{"name": "h", "hostPath": {}}, {"name": "e", "emptyDir": {}}])");
  EXPECT_TRUE(pod_has_emptydir_volume(pod));
}

// Declaring a GPU (any quantity in a regular container) and being allocated one (a non-zero quantity) are
// different rules: the first decides what driver-manager evicts, the second who opens the device in node-sim.
TEST(ObjectsTest, GpuResourceRules) {
  EXPECT_TRUE(is_gpu_resource_name("nvidia.com/gpu"));
  EXPECT_TRUE(is_gpu_resource_name("nvidia.com/gpu.shared"));
  EXPECT_TRUE(is_gpu_resource_name("nvidia.com/mig-1g.5gb"));
  EXPECT_FALSE(is_gpu_resource_name("nvidia.com/GH100_H100"));
  EXPECT_FALSE(is_gpu_resource_name("cpu"));
  EXPECT_TRUE(pod_declares_gpu_resource(kPod));
  EXPECT_TRUE(pod_is_allocated_gpu(kPod));

  const auto pod_with = [](const Json& resources) {
    return Json{{"spec", {{"containers", Json::array({{{"name", "c"}, {"resources", resources}}})}}}};
  };
  for (const Json& zero : {Json("0"), Json("0.0"), Json("0m"), Json(0)}) {
    const Json pod = pod_with({{"limits", {{"nvidia.com/gpu", zero}}}});
    EXPECT_TRUE(pod_declares_gpu_resource(pod)) << zero.dump();
    EXPECT_FALSE(pod_is_allocated_gpu(pod)) << zero.dump();
  }
  EXPECT_TRUE(pod_is_allocated_gpu(pod_with({{"requests", {{"nvidia.com/mig-1g.5gb", "2"}}}})));
  EXPECT_TRUE(pod_is_allocated_gpu(pod_with({{"limits", {{"nvidia.com/gpu", "junk"}}}})));  // not zero
  // An init container's GPU is neither.
  const Json init = {
      {"spec",
       {{"initContainers",
         Json::array({{{"name", "i"}, {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}})}}}};
  EXPECT_FALSE(pod_declares_gpu_resource(init));
  EXPECT_FALSE(pod_is_allocated_gpu(init));
  EXPECT_TRUE(quantity_is_zero("0"));
  EXPECT_FALSE(quantity_is_zero("1"));
  EXPECT_FALSE(quantity_is_zero(""));
}

TEST(ObjectsTest, TerminatingPodUsesDeletionGracePeriod) {
  Json pod = kPod;
  pod["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z";
  pod["metadata"]["deletionGracePeriodSeconds"] = 7;
  EXPECT_TRUE(terminating(pod));
  EXPECT_EQ(pod_grace_period_seconds(pod), 7);
  pod["status"]["phase"] = "Succeeded";
  EXPECT_TRUE(pod_finished(pod));
}

TEST(ObjectsTest, ResourceClaims) {
  const auto claims = pod_resource_claims(kPod);
  ASSERT_EQ(claims.size(), 4U);
  EXPECT_EQ(claims[0].resource_claim_name, "claim-a");
  EXPECT_EQ(claims[1].resource_claim_name, "claim-b");
  EXPECT_EQ(claims[2].resource_claim_template_name, "tmpl");
  EXPECT_EQ(claims[3].resource_claim_template_name, "tmpl2");
  EXPECT_THAT(pod_resource_claim_statuses(kPod),
              ElementsAre(Pair("templated", "dra-plugin-x-templated-q7x")));
  EXPECT_EQ(resolved_claim_name(kPod, claims[0]), "claim-a");
  EXPECT_EQ(resolved_claim_name(kPod, claims[1]), "claim-b");
  EXPECT_EQ(resolved_claim_name(kPod, claims[2]), "dra-plugin-x-templated-q7x");
  EXPECT_EQ(resolved_claim_name(kPod, claims[3]), "");
}

TEST(ObjectsTest, NodeFields) {
  const Json node = Json::parse(R"({
    "metadata": {"name": "gpu-node-1", "labels": {"nvidia.com/gpu.deploy.driver": "true"}},
    "spec": {"unschedulable": true, "taints": [
      {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
      {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]}
  })");
  EXPECT_TRUE(node_unschedulable(node));
  EXPECT_TRUE(node_ready(node));
  EXPECT_EQ(ref_string(node), "gpu-node-1");
  const auto taints = node_taints(node);
  ASSERT_EQ(taints.size(), 2U);
  EXPECT_EQ(taints[0], (Taint{"nvidia.com/gpu", "present", "NoSchedule"}));
  EXPECT_EQ(taints[0].to_json(),
            Json::parse(R"({"key":"nvidia.com/gpu","value":"present","effect":"NoSchedule"})"));
  EXPECT_EQ(taints[1].to_json(),
            Json::parse(R"({"key":"node.kubernetes.io/unreachable","effect":"NoExecute"})"));
  EXPECT_EQ(taints[0].to_string(), "nvidia.com/gpu=present:NoSchedule");
  EXPECT_EQ(taints[1].to_string(), "node.kubernetes.io/unreachable:NoExecute");
  EXPECT_EQ(taint_from_json(taints[0].to_json()), taints[0]);
  EXPECT_FALSE(node_unschedulable(Json::object()));
  EXPECT_FALSE(node_ready(Json::object()));
}

TEST(ObjectsTest, Toleration) {
  const Taint t{"nvidia.com/gpu", "present", "NoSchedule"};
  EXPECT_TRUE(tolerates(Toleration{"nvidia.com/gpu", "Exists", "", "NoSchedule", {}}, t));
  EXPECT_TRUE(tolerates(Toleration{"nvidia.com/gpu", "Exists", "", "", {}}, t));  // every effect
  EXPECT_TRUE(tolerates(Toleration{"", "Exists", "", "", {}}, t));                // everything
  EXPECT_TRUE(tolerates(Toleration{"nvidia.com/gpu", "Equal", "present", "", {}}, t));
  EXPECT_TRUE(tolerates(Toleration{"nvidia.com/gpu", "", "present", "NoSchedule", {}}, t));
  EXPECT_FALSE(tolerates(Toleration{"nvidia.com/gpu", "Equal", "absent", "", {}}, t));
  EXPECT_FALSE(tolerates(Toleration{"nvidia.com/gpu", "Exists", "", "NoExecute", {}}, t));
  EXPECT_FALSE(tolerates(Toleration{"other", "Exists", "", "", {}}, t));
  EXPECT_FALSE(tolerates(Toleration{"nvidia.com/gpu", "Lt", "present", "", {}}, t));
  // Kubernetes' rule: an empty key with Equal matches every key, comparing the value.
  EXPECT_TRUE(tolerates(Toleration{"", "Equal", "present", "", {}}, t));
  EXPECT_FALSE(tolerates(Toleration{"", "Equal", "", "", {}}, t));
  EXPECT_TRUE(tolerates(pod_tolerations(kPod), t));
  EXPECT_FALSE(tolerates(pod_tolerations(kPod), Taint{"x", "", "NoExecute"}));
}

// The tolerations of a pod whose spec.tolerations is `list`.
std::vector<Toleration> tolerations_of(std::initializer_list<Json> list) {
  Json pod = {{"spec", {{"tolerations", Json::array()}}}};
  for (const auto& t : list) pod["spec"]["tolerations"].push_back(t);
  return pod_tolerations(pod);
}

TEST(ObjectsTest, TaintFromJson) {
  const Taint t = taint_from_json(Json::parse(R"({"key":"a","effect":"NoSchedule","timeAdded":null})"));
  EXPECT_EQ(t, (Taint{"a", "", "NoSchedule"}));
}

TEST(ObjectsTest, TolerationMatrix) {
  const Taint t{"nvidia.com/gpu-driver-update", "k8s-driver-manager", "NoSchedule"};
  struct Case {
    const char* toleration;
    bool tolerates;
  };
  const Case cases[] = {
      {R"({"operator":"Exists"})", true},  // empty key + Exists: everything
      {R"({"operator":"Exists","effect":"NoSchedule"})", true},
      {R"({"operator":"Exists","effect":"NoExecute"})", false},
      {R"({"key":"nvidia.com/gpu-driver-update","operator":"Exists"})", true},
      {R"({"key":"nvidia.com/gpu-driver-update","operator":"Exists","effect":"NoSchedule"})", true},
      {R"({"key":"nvidia.com/gpu","operator":"Exists"})", false},
      {R"({"key":"nvidia.com/gpu-driver-update","operator":"Equal","value":"k8s-driver-manager"})", true},
      {R"({"key":"nvidia.com/gpu-driver-update","value":"k8s-driver-manager"})", true},  // default Equal
      {R"({"key":"nvidia.com/gpu-driver-update","operator":"Equal","value":"other"})", false},
      {R"({"key":"nvidia.com/gpu-driver-update","operator":"Equal"})", false},  // value "" != taint value
      {R"({"key":"nvidia.com/gpu-driver-update","operator":"Equal","value":"k8s-driver-manager",
           "effect":"PreferNoSchedule"})",
       false},
      {R"({"key":"nvidia.com/gpu-driver-update","operator":"Bogus","value":"k8s-driver-manager"})", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(tolerates(tolerations_of({Json::parse(c.toleration)}), t), c.tolerates) << c.toleration;
  }
  const Taint keyonly{"nvidia.com/gpu", "", "NoSchedule"};
  EXPECT_TRUE(
      tolerates(tolerations_of({Json::parse(R"({"key":"nvidia.com/gpu","operator":"Equal"})")}), keyonly));
  EXPECT_TRUE(tolerates(tolerations_of({Json::parse(R"({"key":"nvidia.com/gpu"})")}), keyonly));

  EXPECT_FALSE(tolerates(pod_tolerations(Json()), t));
  EXPECT_FALSE(tolerates(tolerations_of({}), t));
  EXPECT_TRUE(tolerates(tolerations_of({Json::parse(R"({"key":"x","operator":"Exists"})"),
                                        Json::parse(R"({"operator":"Exists"})")}),
                        t));
}

// Every view of the pod model, rendered as text: what the rules can see of a pod.
std::string views(const Json& pod) {
  std::ostringstream out;
  out << name(pod) << '|' << namespace_of(pod) << '|' << uid(pod) << '|' << resource_version(pod) << '|'
      << ref_string(pod) << '|' << terminating(pod) << '|' << pod_node_name(pod) << '|' << pod_phase(pod)
      << '|' << pod_finished(pod) << '|' << pod_has_emptydir_volume(pod) << '|' << pod_ready(pod) << '|'
      << pod_is_mirror(pod) << '|' << pod_grace_period_seconds(pod) << '|' << pod_declares_gpu_resource(pod)
      << '|' << pod_is_allocated_gpu(pod) << "\nlabels";
  for (const auto& [k, v] : labels(pod)) out << ' ' << k << '=' << v;
  out << "\nannotations";
  for (const auto& [k, v] : annotations(pod)) out << ' ' << k << '=' << v;
  out << "\nowners";
  for (const auto& o : owner_refs(pod))
    out << ' ' << o.api_version << ',' << o.kind << ',' << o.name << ',' << o.uid << ',' << o.controller;
  out << "\nselector";
  for (const auto& [k, v] : pod_node_selector(pod)) out << ' ' << k << '=' << v;
  out << "\ntolerations";
  for (const auto& t : pod_tolerations(pod)) {
    out << ' ' << t.key << ',' << t.op << ',' << t.value << ',' << t.effect << ','
        << t.toleration_seconds.value_or(-1);
  }
  out << "\nresources";
  for (const auto& r : pod_container_resources(pod))
    out << ' ' << r.container << ',' << r.name << ',' << r.quantity;
  out << "\nclaims";
  for (const auto& c : pod_resource_claims(pod)) {
    out << ' ' << c.name << ',' << c.resource_claim_name << ',' << c.resource_claim_template_name << ','
        << resolved_claim_name(pod, c);
  }
  out << "\nplacement " << pod_runtime_class_name(pod);
  for (const auto& k : required_node_affinity_keys(pod)) out << ' ' << k;
  out << ' ' << pod_fits_node(pod, {"gpu-node-1", {{"nvidia.com/gpu.present", "true"}}});
  for (const auto& v : container_env_values(pod, kVisibleDevicesEnv)) out << ' ' << v;
  return out.str();
}

Json pod_fixture(const std::string& name) {
  return Json::parse(test::read_file(test::source_path("tests/fixtures/pods/" + name + ".json")));
}

TEST(ObjectsTest, DropUnreadPodFieldsRemovesTheHeavyParts) {
  Json pod = pod_fixture("api-server-gpu-pod");
  pod["spec"]["containers"][0]["env"].push_back({{"name", "HOME"}, {"value", "/root"}});
  pod["spec"]["affinity"]["podAntiAffinity"] = {
      {"preferredDuringSchedulingIgnoredDuringExecution", Json::array()}};
  const Json required =
      pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  const size_t whole = pod.dump().size();
  drop_unread_pod_fields(pod);
  EXPECT_FALSE(pod["spec"].contains("initContainers"));
  // Of the affinity only the required node affinity (pod placement), of the environment only
  // NVIDIA_VISIBLE_DEVICES (GPU users without a GPU request) are read.
  EXPECT_EQ(pod["spec"]["affinity"],
            (Json{{"nodeAffinity", {{"requiredDuringSchedulingIgnoredDuringExecution", required}}}}));
  EXPECT_EQ(pod["spec"]["containers"][0]["env"],
            Json::parse(R"([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])"));
  EXPECT_FALSE(pod["status"].contains("containerStatuses"));
  EXPECT_FALSE(pod["status"].contains("initContainerStatuses"));
  for (const char* key : {"command", "args", "ports", "volumeMounts", "livenessProbe", "readinessProbe",
                          "securityContext", "lifecycle"}) {
    for (const auto& c : pod["spec"]["containers"]) EXPECT_FALSE(c.contains(key)) << key;
  }
  EXPECT_FALSE(pod["spec"]["volumes"][1].contains("projected"));
  EXPECT_EQ(pod["spec"]["volumes"][1]["name"], "kube-api-access-7xk2p");  // the volume itself stays
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "example.com/trainer:1");
  for (const char* key : {"podIP", "hostIP", "startTime", "qosClass"})
    EXPECT_FALSE(pod["status"].contains(key));
  EXPECT_EQ(pod["status"]["conditions"][1], (Json{{"type", "Ready"}, {"status", "True"}}));
  EXPECT_EQ(pod["spec"]["serviceAccountName"], "default");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Always");
  EXPECT_LT(pod.dump().size() * 10, whole * 6);  // less than 60 % of the pod's text is left
  // Not a pod, or a pod without those parts: nothing happens.
  Json odd = Json::array({1, 2});
  drop_unread_pod_fields(odd);
  EXPECT_EQ(odd, Json::array({1, 2}));
  Json bare = {{"spec", "x"}, {"status", 3}};
  drop_unread_pod_fields(bare);
  EXPECT_EQ(bare, (Json{{"spec", "x"}, {"status", 3}}));
}

// The list of dropped fields and the views must not overlap: every view reads the same from a pruned pod.
TEST(ObjectsTest, DropUnreadPodFieldsKeepsWhatEveryViewReads) {
  int pods = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_path("tests/fixtures/pods"))) {
    Json pod = Json::parse(test::read_file(entry.path().string()));
    if (pod.value("kind", "") != "Pod") continue;
    ++pods;
    const std::string before = views(pod);
    drop_unread_pod_fields(pod);
    EXPECT_EQ(views(pod), before) << entry.path();
  }
  EXPECT_GT(pods, 20);
  // The realistic pod carries every dropped field and exercises each view.
  const Json pod = pod_fixture("api-server-gpu-pod");
  const std::string v = views(pod);
  EXPECT_NE(v.find("main,nvidia.com/gpu,1"), std::string::npos) << v;
  EXPECT_NE(v.find("gpu,,one-gpu,trainer-6b8f9c7d5-x2k4q-gpu-q7x"), std::string::npos) << v;
  EXPECT_NE(v.find("|45|1|1\n"), std::string::npos) << v;  // grace period, GPU declared and allocated
  EXPECT_EQ(v.find("mig-1g"), std::string::npos) << v;     // init containers are not read
}

}  // namespace
}  // namespace dm::kube
