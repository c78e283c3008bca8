// The contract of kube::Api as the flow relies on it, one typed test suite run against the in-memory cluster
// (tests/unit/api_contract_test.cc, label `unit`) and the real API server (tests/integration/
// api_contract_real_test.cc, label `integration`): what the fake answers is what Kubernetes answers.
//
// A backend is a class with
//   static void SetUpTestSuite() / TearDownTestSuite()   one cluster for the suite (or nothing)
//   kube::Api& api()                                     a client as the cluster's admin
//   void await_budget(ns, name)                          until the disruption controller has computed it
//   void run_daemonset_controller()                      DaemonSets get their pods from now on
//   bool serves_dra_v1()                                 resource.k8s.io/v1 is served (Kubernetes 1.34+)
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kube/api.h"
#include "kube/objects.h"
#include "support/cluster.h"

namespace dm::test::contract {

inline std::string unique(const std::string& prefix) {
  static std::atomic<int> n{0};
  return prefix + "-" + std::to_string(::getpid() % 100000) + "-" + std::to_string(++n);
}

template <class Backend>
class ApiContract : public ::testing::Test {
 public:
  static void SetUpTestSuite() { Backend::SetUpTestSuite(); }
  static void TearDownTestSuite() { Backend::TearDownTestSuite(); }

 protected:
  void SetUp() override {
    ns_ = unique("contract");
    node_ = unique("contract-node");
    ASSERT_TRUE(api().create("/api/v1/namespaces",
                             {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns_}}}}));
    ASSERT_TRUE(api().create(kube::paths::nodes(),
                             {{"apiVersion", "v1"},
                              {"kind", "Node"},
                              {"metadata", {{"name", node_}, {"labels", {{"a", "1"}, {"b", "2"}}}}}}));
  }
  void TearDown() override { (void)api().remove(kube::paths::node(node_)); }

  kube::Api& api() { return backend_.api(); }
  // On a server without resource.k8s.io/v1: a list and a create of `collection` are NotFound.
  void expect_dra_v1_not_found(const std::string& collection) {
    auto listed = api().list_all(collection, {});
    ASSERT_FALSE(listed);
    EXPECT_TRUE(listed.error().not_found()) << listed.error().message;
    auto created = api().create(collection, {{"apiVersion", "resource.k8s.io/v1"},
                                             {"kind", "ResourceClaim"},
                                             {"metadata", {{"name", "not-served"}}}});
    ASSERT_FALSE(created);
    EXPECT_TRUE(created.error().not_found()) << created.error().message;
  }

  // A pod (bound to `node`, "" = none, and left so); retried while the namespace's service account is not
  // there yet.
  nlohmann::json make_pod(const std::string& name, const nlohmann::json& labels, const std::string& node,
                          int grace = 30) {
    nlohmann::json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata", {{"name", name}, {"namespace", ns_}, {"labels", labels}}},
        {"spec",
         {{"terminationGracePeriodSeconds", grace},
          {"automountServiceAccountToken", false},
          {"containers", nlohmann::json::array({{{"name", "main"}, {"image", "example.com/x:1"}}})}}}};
    if (!node.empty()) pod["spec"]["nodeName"] = node;
    // An unbound pod stays unbound: no scheduler answers to this name (the real one would write its
    // PodScheduled condition, a change the in-memory cluster, which has no scheduler, never makes).
    if (node.empty()) pod["spec"]["schedulerName"] = "contract-no-scheduler";
    nlohmann::json created;
    eventually([&] {
      auto r = api().create(kube::paths::pods(ns_), pod);
      if (r) created = *r;
      return r.ok();
    });
    EXPECT_FALSE(created.is_null()) << "cannot create pod " << name;
    return created;
  }
  // Running and Ready, as a kubelet reports it.
  void make_ready(const std::string& name) {
    const nlohmann::json status = {
        {"status",
         {{"phase", "Running"},
          {"conditions", nlohmann::json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
    ASSERT_TRUE(
        api().patch(kube::paths::pod(ns_, name) + "/status", kube::PatchType::kStrategicMerge, status));
  }
  std::vector<std::string> names(const std::vector<nlohmann::json>& items) {
    std::vector<std::string> out;
    for (const auto& i : items) out.push_back(kube::name(i));
    std::sort(out.begin(), out.end());
    return out;
  }

  Backend backend_;
  std::string ns_;
  std::string node_;
};

TYPED_TEST_SUITE_P(ApiContract);

TYPED_TEST_P(ApiContract, MergePatchSetsAndRemovesNodeLabels) {
  auto before = this->api().get(kube::paths::node(this->node_));
  ASSERT_TRUE(before);
  auto r = this->api().patch(kube::paths::node(this->node_), kube::PatchType::kMerge,
                             {{"metadata", {{"labels", {{"a", nullptr}, {"c", "3"}}}}}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(kube::label(*r, "a").has_value());
  EXPECT_EQ(kube::label(*r, "b"), "2");
  EXPECT_EQ(kube::label(*r, "c"), "3");
  EXPECT_NE(kube::resource_version(*r), kube::resource_version(*before));
}

TYPED_TEST_P(ApiContract, StrategicMergePatchMergesLabelsAndSetsUnschedulable) {
  auto r = this->api().patch(kube::paths::node(this->node_), kube::PatchType::kStrategicMerge,
                             {{"metadata", {{"labels", {{"x", "y"}}}, {"annotations", {{"k", "v"}}}}},
                              {"spec", {{"unschedulable", true}}}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(kube::label(*r, "a"), "1");
  EXPECT_EQ(kube::label(*r, "x"), "y");
  EXPECT_EQ(kube::annotation(*r, "k"), "v");
  EXPECT_TRUE(kube::node_unschedulable(*r));
}

TYPED_TEST_P(ApiContract, AMergePatchReplacesTheTaintList) {
  const nlohmann::json one = nlohmann::json::array({{{"key", "k1"}, {"effect", "NoSchedule"}}});
  const nlohmann::json two =
      nlohmann::json::array({{{"key", "k2"}, {"value", "v"}, {"effect", "NoExecute"}}});
  ASSERT_TRUE(this->api().patch(kube::paths::node(this->node_), kube::PatchType::kMerge,
                                {{"spec", {{"taints", one}}}}));
  auto r = this->api().patch(kube::paths::node(this->node_), kube::PatchType::kMerge,
                             {{"spec", {{"taints", two}}}});
  ASSERT_TRUE(r) << r.error().message;
  std::vector<std::string> ours;
  for (const auto& t : kube::node_taints(*r)) {
    if (t.key == "k1" || t.key == "k2") ours.push_back(t.to_string());
  }
  EXPECT_THAT(ours, ::testing::ElementsAre("k2=v:NoExecute"));
}

TYPED_TEST_P(ApiContract, AWriteFromAStaleResourceVersionIsAConflict) {
  // The first write from a fresh read (the node lifecycle controller may change a new node in between:
  // read again then).
  std::string rv;
  const bool first = eventually([&] {
    auto node = this->api().get(kube::paths::node(this->node_));
    if (!node) return false;
    rv = kube::resource_version(*node);
    return this->api()
        .patch(kube::paths::node(this->node_), kube::PatchType::kMerge,
               {{"metadata", {{"resourceVersion", rv}, {"labels", {{"n", "1"}}}}}})
        .ok();
  });
  ASSERT_TRUE(first);
  auto second = this->api().patch(kube::paths::node(this->node_), kube::PatchType::kMerge,
                                  {{"metadata", {{"resourceVersion", rv}, {"labels", {{"n", "2"}}}}}});
  ASSERT_FALSE(second);
  EXPECT_TRUE(second.error().conflict()) << second.error().message;
  EXPECT_EQ(second.error().reason, "Conflict");
  EXPECT_EQ(kube::label(*this->api().get(kube::paths::node(this->node_)), "n"), "1");
}

// A JSON patch whose "test" guards a value: applied whatever else changed on the object since (its
// resourceVersion moved on), refused (422, nothing changed) once the value itself is another.
TYPED_TEST_P(ApiContract, AJsonPatchTestGuardsTheValueNotTheVersion) {
  const std::string path = kube::paths::node(this->node_);
  ASSERT_TRUE(this->api().patch(path, kube::PatchType::kMerge,
                                {{"metadata", {{"annotations", {{"example.com/held", "one"}}}}}}));
  ASSERT_TRUE(
      this->api().patch(path, kube::PatchType::kMerge, {{"metadata", {{"labels", {{"other", "write"}}}}}}));
  const nlohmann::json ptr = "/metadata/annotations/example.com~1held";
  auto applied = this->api().patch(
      path, kube::PatchType::kJsonPatch,
      nlohmann::json::array(
          {{{"op", "test"}, {"path", ptr}, {"value", "one"}},
           {{"op", "replace"}, {"path", ptr}, {"value", "two"}},
           {{"op", "add"}, {"path", "/metadata/annotations/example.com~1rider"}, {"value", "r"}}}));
  ASSERT_TRUE(applied) << applied.error().message;
  EXPECT_EQ(kube::annotation(*applied, "example.com/held"), "two");
  EXPECT_EQ(kube::annotation(*applied, "example.com/rider"), "r");
  auto refused =
      this->api().patch(path, kube::PatchType::kJsonPatch,
                        nlohmann::json::array({{{"op", "test"}, {"path", ptr}, {"value", "one"}},
                                               {{"op", "replace"}, {"path", ptr}, {"value", "three"}}}));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().http_status, 422) << refused.error().message;
  EXPECT_EQ(kube::annotation(*this->api().get(path), "example.com/held"), "two");
}

TYPED_TEST_P(ApiContract, CreatingAnExistingNameIsAlreadyExists) {
  auto again = this->api().create(
      kube::paths::nodes(), {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", this->node_}}}});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().http_status, 409);
  EXPECT_EQ(again.error().reason, "AlreadyExists");
}

TYPED_TEST_P(ApiContract, LabelAndFieldSelectorsSelectPods) {
  this->make_pod("p-a", {{"app", "a"}}, this->node_);
  this->make_pod("p-b", {{"app", "b"}, {"x", "1"}}, this->node_);
  this->make_pod("p-c", {{"app", "c"}}, "");
  const auto list = [&](const std::string& labels, const std::string& fields) {
    kube::ListOptions o;
    o.label_selector = labels;
    o.field_selector = fields;
    auto r = this->api().list_all(kube::paths::pods(this->ns_), o);
    EXPECT_TRUE(r) << r.error().message;
    return r ? this->names(*r) : std::vector<std::string>{};
  };
  using ::testing::ElementsAre;
  EXPECT_THAT(list("app=a", ""), ElementsAre("p-a"));
  EXPECT_THAT(list("app in (a,b)", ""), ElementsAre("p-a", "p-b"));
  EXPECT_THAT(list("!x", ""), ElementsAre("p-a", "p-c"));
  EXPECT_THAT(list("app!=a", ""), ElementsAre("p-b", "p-c"));
  EXPECT_THAT(list("", "spec.nodeName=" + this->node_), ElementsAre("p-a", "p-b"));
  EXPECT_THAT(list("x", "spec.nodeName=" + this->node_), ElementsAre("p-b"));
  // Across all namespaces, as the pod watch lists: items carry kind and apiVersion.
  kube::ListOptions o;
  o.field_selector = "spec.nodeName=" + this->node_;
  auto all = this->api().list_all(kube::paths::pods(), o);
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2U);
  EXPECT_EQ(all->front().value("kind", ""), "Pod");
  EXPECT_EQ(all->front().value("apiVersion", ""), "v1");
}

TYPED_TEST_P(ApiContract, APagedListReducesEveryItemAndLeavesOutThoseReducedToNull) {
  for (const char* name : {"p-a", "p-b", "p-c"}) this->make_pod(name, {{"app", "paged"}}, this->node_);
  kube::ListOptions o;
  o.label_selector = "app=paged";
  o.limit = 1;  // a page a pod: the continue token carries the list on
  std::vector<std::string> seen;
  o.reduce = [&seen](nlohmann::json& pod) {
    seen.push_back(kube::name(pod));
    if (kube::name(pod) == "p-b") pod = nullptr;
  };
  auto r = this->api().list_all(kube::paths::pods(this->ns_), o);
  ASSERT_TRUE(r) << r.error().message;
  std::sort(seen.begin(), seen.end());
  EXPECT_THAT(seen, ::testing::ElementsAre("p-a", "p-b", "p-c"));
  EXPECT_THAT(this->names(*r), ::testing::ElementsAre("p-a", "p-c"));
}

TYPED_TEST_P(ApiContract, AWatchAfterTheListSeesEveryChangeAndSelectorTransitions) {
  this->make_pod("before", {{"app", "w"}}, this->node_);
  kube::ListOptions o;
  o.label_selector = "app=w";
  std::vector<std::string> seen;
  std::atomic<bool> synced{false};
  kube::WatchHandlers h;
  h.on_sync = [&](std::vector<nlohmann::json>& items) {
    for (const auto& i : items) seen.push_back("SYNC " + kube::name(i));
    synced = true;
  };
  h.on_event = [&](kube::WatchEvent& e) { seen.push_back(e.type + " " + kube::name(e.object)); };
  h.done = [&] { return !seen.empty() && seen.back() == "DELETED gone"; };
  h.tick = std::chrono::milliseconds(50);
  std::thread writer([&] {
    eventually([&] { return synced.load(); });
    this->make_pod("after", {{"app", "w"}}, this->node_);
    (void)this->api().patch(kube::paths::pod(this->ns_, "after"), kube::PatchType::kMerge,
                            {{"metadata", {{"annotations", {{"k", "v"}}}}}});
    (void)this->api().patch(kube::paths::pod(this->ns_, "before"), kube::PatchType::kMerge,
                            {{"metadata", {{"labels", {{"app", "other"}}}}}});
    this->make_pod("gone", {{"app", "w"}}, "");
    (void)this->api().remove(kube::paths::pod(this->ns_, "gone"));
  });
  SystemClock clock;
  auto st = this->api().list_watch(kube::paths::pods(this->ns_), o, h,
                                   Deadline::after(clock, std::chrono::seconds(30)));
  writer.join();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_THAT(seen, ::testing::ElementsAre("SYNC before", "ADDED after", "MODIFIED after", "DELETED before",
                                           "ADDED gone", "MODIFIED gone", "DELETED gone"));
}

TYPED_TEST_P(ApiContract, APodOnANodeIsTerminatingUntilDeletedWithGraceZero) {
  const nlohmann::json pod = this->make_pod("graceful", {{"app", "g"}}, this->node_, 45);
  const std::string path = kube::paths::pod(this->ns_, "graceful");
  ASSERT_TRUE(this->api().remove(path));
  auto still = this->api().get(path);
  ASSERT_TRUE(still) << "a pod on a node stays until its kubelet is done";
  EXPECT_TRUE(kube::terminating(*still));
  EXPECT_EQ(still->at("metadata").value("deletionGracePeriodSeconds", 0), 45);
  kube::DeleteOptions wrong;
  wrong.grace_period_seconds = 0;
  wrong.uid = "not-its-uid";
  auto refused = this->api().remove(path, wrong);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().conflict()) << refused.error().message;
  kube::DeleteOptions now;
  now.grace_period_seconds = 0;
  now.uid = kube::uid(pod);
  ASSERT_TRUE(this->api().remove(path, now));
  auto gone = this->api().get(path);
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.error().not_found());
}

TYPED_TEST_P(ApiContract, APodOnNoNodeIsDeletedAtOnce) {
  this->make_pod("unbound", {{"app", "u"}}, "");
  ASSERT_TRUE(this->api().remove(kube::paths::pod(this->ns_, "unbound")));
  EXPECT_TRUE(this->api().get(kube::paths::pod(this->ns_, "unbound")).error().not_found());
}

TYPED_TEST_P(ApiContract, AnEvictionTheBudgetForbidsIs429WithTheBudgetAsCause) {
  this->make_pod("guarded", {{"app", "guarded"}}, this->node_);
  this->make_ready("guarded");
  ASSERT_TRUE(this->api().create(
      "/apis/policy/v1/namespaces/" + this->ns_ + "/poddisruptionbudgets",
      {{"apiVersion", "policy/v1"},
       {"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", "guard-budget"}}},
       {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "guarded"}}}}}}}}));
  this->backend_.await_budget(this->ns_, "guard-budget");
  auto refused = this->api().evict(this->ns_, "guarded");
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().too_many_requests()) << refused.error().message;
  EXPECT_EQ(refused.error().reason, "TooManyRequests");
  EXPECT_TRUE(refused.error().has_cause("DisruptionBudget")) << refused.error().message;
  EXPECT_THAT(refused.error().message, ::testing::HasSubstr("disruption budget guard-budget"));
  EXPECT_FALSE(kube::terminating(*this->api().get(kube::paths::pod(this->ns_, "guarded"))));

  ASSERT_TRUE(
      this->api().remove("/apis/policy/v1/namespaces/" + this->ns_ + "/poddisruptionbudgets/guard-budget"));
  auto evicted = this->api().evict(this->ns_, "guarded");
  ASSERT_TRUE(evicted) << evicted.error().message;
  auto after = this->api().get(kube::paths::pod(this->ns_, "guarded"));
  ASSERT_TRUE(after);
  EXPECT_TRUE(kube::terminating(*after)) << "an evicted pod on a node terminates gracefully";
}

// A pod that has not started yet is no disruption: the budget is not consulted.
TYPED_TEST_P(ApiContract, APendingPodIsEvictedWhateverItsBudget) {
  this->make_pod("pending", {{"app", "pending"}}, this->node_);
  ASSERT_TRUE(this->api().create(
      "/apis/policy/v1/namespaces/" + this->ns_ + "/poddisruptionbudgets",
      {{"apiVersion", "policy/v1"},
       {"kind", "PodDisruptionBudget"},
       {"metadata", {{"name", "pending-budget"}}},
       {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "pending"}}}}}}}}));
  this->backend_.await_budget(this->ns_, "pending-budget");
  auto r = this->api().evict(this->ns_, "pending");
  ASSERT_TRUE(r) << r.error().message;
}

TYPED_TEST_P(ApiContract, EvictingAPodThatIsGoneIs404) {
  auto r = this->api().evict(this->ns_, "no-such-pod");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().not_found()) << r.error().message;
}

TYPED_TEST_P(ApiContract, AnEventAboutTheNodeIsRecordedInDefault) {
  auto node = this->api().get(kube::paths::node(this->node_));
  ASSERT_TRUE(node);
  ASSERT_TRUE(this->api().create_event(*node, "ContractReason", "a message", "Warning"));
  kube::ListOptions o;
  // The node lifecycle controller records Events about a new node too: ours by its reason.
  o.field_selector = "involvedObject.name=" + this->node_ + ",reason=ContractReason";
  auto events = this->api().list_all("/api/v1/namespaces/default/events", o);
  ASSERT_TRUE(events) << events.error().message;
  ASSERT_EQ(events->size(), 1U);
  EXPECT_EQ(events->front().value("reason", ""), "ContractReason");
  EXPECT_EQ(events->front().value("type", ""), "Warning");
  EXPECT_EQ(events->front().value("message", ""), "a message");
}

TYPED_TEST_P(ApiContract, AnAccessReviewIsAnsweredWithoutStoringAnything) {
  auto r =
      this->api().create("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                         {{"apiVersion", "authorization.k8s.io/v1"},
                          {"kind", "SelfSubjectAccessReview"},
                          {"spec", {{"resourceAttributes", {{"verb", "patch"}, {"resource", "nodes"}}}}}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->at("status").value("allowed", false));
}

// policy/v1: an evicted pod is told why it goes (the DisruptionTarget condition) before it terminates.
TYPED_TEST_P(ApiContract, AnEvictedPodCarriesTheDisruptionTargetCondition) {
  this->make_pod("told", {{"app", "told"}}, this->node_);
  this->make_ready("told");
  ASSERT_TRUE(this->api().evict(this->ns_, "told"));
  auto pod = this->api().get(kube::paths::pod(this->ns_, "told"));
  ASSERT_TRUE(pod) << "a pod on a node stays while it terminates";
  EXPECT_TRUE(kube::terminating(*pod));
  const nlohmann::json* conditions = kube::find(*pod, {"status", "conditions"});
  ASSERT_NE(conditions, nullptr);
  bool found = false;
  for (const auto& c : *conditions) {
    if (c.value("type", "") != "DisruptionTarget") continue;
    found = true;
    EXPECT_EQ(c.value("status", ""), "True");
    EXPECT_EQ(c.value("reason", ""), "EvictionByEvictionAPI");
  }
  EXPECT_TRUE(found) << pod->dump();
}

// policy/v1: a budget with an empty selector covers every pod of its namespace (policy/v1beta1 covered none).
TYPED_TEST_P(ApiContract, ABudgetWithAnEmptySelectorCoversEveryPodOfItsNamespace) {
  this->make_pod("anyone", {{"app", "anyone"}}, this->node_);
  this->make_ready("anyone");
  ASSERT_TRUE(this->api().create("/apis/policy/v1/namespaces/" + this->ns_ + "/poddisruptionbudgets",
                                 {{"apiVersion", "policy/v1"},
                                  {"kind", "PodDisruptionBudget"},
                                  {"metadata", {{"name", "everyone"}}},
                                  {"spec", {{"minAvailable", 1}, {"selector", nlohmann::json::object()}}}}));
  this->backend_.await_budget(this->ns_, "everyone");
  auto refused = this->api().evict(this->ns_, "anyone");
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().too_many_requests()) << refused.error().message;
  EXPECT_TRUE(refused.error().has_cause("DisruptionBudget")) << refused.error().message;
}

// policy/v1 unhealthyPodEvictionPolicy: a running pod that is not Ready is evicted under AlwaysAllow although
// the budget allows no disruption.
TYPED_TEST_P(ApiContract, AnUnreadyPodGoesUnderAlwaysAllowWhateverTheBudget) {
  this->make_pod("steady", {{"app", "mixed"}}, this->node_);
  this->make_ready("steady");
  this->make_pod("stuck", {{"app", "mixed"}}, this->node_);
  ASSERT_TRUE(this->api().patch(
      kube::paths::pod(this->ns_, "stuck") + "/status", kube::PatchType::kStrategicMerge,
      {{"status",
        {{"phase", "Running"},
         {"conditions", nlohmann::json::array({{{"type", "Ready"}, {"status", "False"}}})}}}}));
  ASSERT_TRUE(this->api().create("/apis/policy/v1/namespaces/" + this->ns_ + "/poddisruptionbudgets",
                                 {{"apiVersion", "policy/v1"},
                                  {"kind", "PodDisruptionBudget"},
                                  {"metadata", {{"name", "mixed-budget"}}},
                                  {"spec",
                                   {{"minAvailable", 2},
                                    {"unhealthyPodEvictionPolicy", "AlwaysAllow"},
                                    {"selector", {{"matchLabels", {{"app", "mixed"}}}}}}}}));
  this->backend_.await_budget(this->ns_, "mixed-budget");
  auto ready = this->api().evict(this->ns_, "steady");
  ASSERT_FALSE(ready) << "the Ready pod is guarded: the budget wants 2 and has 1";
  EXPECT_TRUE(ready.error().too_many_requests()) << ready.error().message;
  auto unready = this->api().evict(this->ns_, "stuck");
  ASSERT_TRUE(unready) << unready.error().message;
}

// DRA (resource.k8s.io/v1): a claim keeps the allocation and the consumers its status is given; the claim
// guard reads exactly these fields.
TYPED_TEST_P(ApiContract, AResourceClaimKeepsItsAllocationAndReservedFor) {
  const std::string path = "/apis/resource.k8s.io/v1/namespaces/" + this->ns_ + "/resourceclaims";
  if (!this->backend_.serves_dra_v1()) {
    // Before Kubernetes 1.34 the API is not there: a claim cannot be written (nor read: no GPU claim).
    this->expect_dra_v1_not_found(path);
    return;
  }
  ASSERT_TRUE(this->api().create(
      path, {{"apiVersion", "resource.k8s.io/v1"},
             {"kind", "ResourceClaim"},
             {"metadata", {{"name", "gpu-claim"}}},
             {"spec",
              {{"devices",
                {{"requests",
                  nlohmann::json::array(
                      {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.nvidia.com"}}}}})}}}}}}));
  auto holder = this->make_pod("claimant", {{"app", "claimant"}}, this->node_);
  const nlohmann::json status = {
      {"status",
       {{"allocation",
         {{"devices",
           {{"results", nlohmann::json::array({{{"request", "gpu"},
                                                {"driver", "gpu.nvidia.com"},
                                                {"pool", this->node_},
                                                {"device", "gpu-0"}}})}}}}},
        {"reservedFor", nlohmann::json::array(
                            {{{"resource", "pods"}, {"name", "claimant"}, {"uid", kube::uid(holder)}}})}}}};
  auto r = this->api().patch(path + "/gpu-claim/status", kube::PatchType::kMerge, status);
  ASSERT_TRUE(r) << r.error().message;
  auto claim = this->api().get(kube::paths::resource_claim(this->ns_, "gpu-claim"));
  ASSERT_TRUE(claim) << claim.error().message;
  const nlohmann::json* results = kube::find(*claim, {"status", "allocation", "devices", "results"});
  ASSERT_NE(results, nullptr);
  ASSERT_EQ(results->size(), 1U);
  EXPECT_EQ((*results)[0].value("driver", ""), "gpu.nvidia.com");
  const nlohmann::json* reserved = kube::find(*claim, {"status", "reservedFor"});
  ASSERT_NE(reserved, nullptr);
  ASSERT_EQ(reserved->size(), 1U);
  EXPECT_EQ((*reserved)[0].value("uid", ""), kube::uid(holder));
}

// DRA: the ResourceSlices a driver publishes for a node are found by node and driver.
TYPED_TEST_P(ApiContract, ResourceSlicesAreSelectedByNodeAndDriver) {
  if (!this->backend_.serves_dra_v1()) {
    // Before Kubernetes 1.34 the API is not there: the node's slices are not found (DRA judged from pods).
    this->expect_dra_v1_not_found("/apis/resource.k8s.io/v1/resourceslices");
    return;
  }
  const auto slice = [&](const std::string& name, const std::string& driver) {
    return nlohmann::json{{"apiVersion", "resource.k8s.io/v1"},
                          {"kind", "ResourceSlice"},
                          {"metadata", {{"name", name}}},
                          {"spec",
                           {{"driver", driver},
                            {"nodeName", this->node_},
                            {"pool", {{"name", this->node_}, {"generation", 1}, {"resourceSliceCount", 1}}},
                            {"devices", nlohmann::json::array({{{"name", "gpu-0"}}})}}}};
  };
  ASSERT_TRUE(this->api().create("/apis/resource.k8s.io/v1/resourceslices",
                                 slice(this->node_ + "-gpu", "gpu.nvidia.com")));
  ASSERT_TRUE(this->api().create("/apis/resource.k8s.io/v1/resourceslices",
                                 slice(this->node_ + "-nic", "nic.example.com")));
  kube::ListOptions o;
  o.field_selector = "spec.nodeName=" + this->node_ + ",spec.driver=gpu.nvidia.com";
  auto slices = this->api().list_all("/apis/resource.k8s.io/v1/resourceslices", o);
  ASSERT_TRUE(slices) << slices.error().message;
  EXPECT_EQ(this->names(*slices), std::vector<std::string>{this->node_ + "-gpu"});
  for (const char* n : {"-gpu", "-nic"})
    (void)this->api().remove("/apis/resource.k8s.io/v1/resourceslices/" + this->node_ + n);
}

// The DRA claim guard reads each claim a pod references; one that is not there - also on a server that
// serves no resource.k8s.io/v1 - is NotFound, which the guard takes as "no GPU claim".
TYPED_TEST_P(ApiContract, AResourceClaimThatIsNotThereIsNotFound) {
  auto r = this->api().get(kube::paths::resource_claim(this->ns_, "no-such-claim"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().not_found()) << r.error().message;
}

// A RuntimeClass (cluster-scoped, node.k8s.io/v1) is read by name for its handler; one that is not there is
// NotFound.
TYPED_TEST_P(ApiContract, ARuntimeClassIsReadWithItsHandler) {
  const std::string name = unique("contract-rc");
  ASSERT_TRUE(this->api().create("/apis/node.k8s.io/v1/runtimeclasses", {{"apiVersion", "node.k8s.io/v1"},
                                                                         {"kind", "RuntimeClass"},
                                                                         {"metadata", {{"name", name}}},
                                                                         {"handler", "nvidia"}}));
  auto rc = this->api().get(kube::paths::runtime_class(name));
  ASSERT_TRUE(rc) << rc.error().message;
  EXPECT_EQ(kube::string_at(*rc, {"handler"}), "nvidia");
  EXPECT_EQ(kube::name(*rc), name);
  (void)this->api().remove(kube::paths::runtime_class(name));
  auto missing = this->api().get(kube::paths::runtime_class(unique("no-such-rc")));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().not_found()) << missing.error().message;
}

// The DaemonSet controller as the flow meets it: a pod for a node the node selector picks; a NoSchedule taint
// the pod does not tolerate leaves the running pod alone, a NoExecute one deletes it (the taint eviction
// controller, once the pod is bound). (The real controller
// creates its pod with a node affinity for the scheduler to bind, the in-memory one binds it itself: the
// pod's node is either.)
TYPED_TEST_P(ApiContract, ADaemonSetPodStaysUnderANoScheduleTaintAndGoesUnderNoExecute) {
  this->backend_.run_daemonset_controller();
  // Room for pods, as a kubelet reports it: the scheduler binds the DaemonSet's pod only to a node that has
  // some (a pod that stays Pending is not the taint eviction's to delete).
  const nlohmann::json room = {{"pods", "110"}, {"cpu", "4"}, {"memory", "8Gi"}};
  ASSERT_TRUE(this->api().patch(kube::paths::node(this->node_) + "/status", kube::PatchType::kMerge,
                                {{"status", {{"capacity", room}, {"allocatable", room}}}}));
  const std::string pick = "contract-ds";
  ASSERT_TRUE(this->api().patch(kube::paths::node(this->node_), kube::PatchType::kMerge,
                                {{"metadata", {{"labels", {{pick, this->ns_}}}}}}));
  // A node with no kubelet is tainted not-ready / unreachable by the node lifecycle controller.
  nlohmann::json tolerations = nlohmann::json::array();
  for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
    tolerations.push_back({{"key", key}, {"operator", "Exists"}});
  const nlohmann::json ds = {
      {"apiVersion", "apps/v1"},
      {"kind", "DaemonSet"},
      {"metadata", {{"name", "agent"}, {"namespace", this->ns_}}},
      {"spec",
       {{"selector", {{"matchLabels", {{"app", "agent"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "agent"}}}}},
          {"spec",
           {{"nodeSelector", {{pick, this->ns_}}},
            {"tolerations", tolerations},
            {"automountServiceAccountToken", false},
            {"containers", nlohmann::json::array({{{"name", "main"}, {"image", "example.com/x:1"}}})}}}}}}}};
  ASSERT_TRUE(this->api().create("/apis/apps/v1/namespaces/" + this->ns_ + "/daemonsets", ds));
  const auto pod_on_node = [&]() -> std::optional<nlohmann::json> {
    auto pods = this->api().list_all(kube::paths::pods(this->ns_), {});
    if (!pods) return std::nullopt;
    for (const auto& p : *pods) {
      if (kube::pod_node_name(p) == this->node_ ||
          p.dump().find('"' + this->node_ + '"') != std::string::npos)
        return p;
    }
    return std::nullopt;
  };
  std::optional<nlohmann::json> pod;
  ASSERT_TRUE(eventually([&] { return (pod = pod_on_node()).has_value(); }))
      << "the DaemonSet got no pod for the node";
  const std::string uid = kube::uid(*pod);
  const auto taint = [&](const char* effect) {
    ASSERT_TRUE(this->api().patch(
        kube::paths::node(this->node_), kube::PatchType::kMerge,
        {{"spec",
          {{"taints", nlohmann::json::array({{{"key", "contract/keep-off"}, {"effect", effect}}})}}}}));
  };
  taint("NoSchedule");
  // Nothing is to happen: a few seconds for a controller that would delete it to do so.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  pod = pod_on_node();
  ASSERT_TRUE(pod.has_value()) << "the pod was deleted under a NoSchedule taint";
  EXPECT_EQ(kube::uid(*pod), uid);
  EXPECT_FALSE(kube::terminating(*pod)) << "the pod is being deleted under a NoSchedule taint";
  taint("NoExecute");
  EXPECT_TRUE(eventually([&] {
    pod = pod_on_node();
    return !pod || kube::uid(*pod) != uid || kube::terminating(*pod);
  })) << "the pod stayed under a NoExecute taint it does not tolerate";
}

REGISTER_TYPED_TEST_SUITE_P(
    ApiContract, MergePatchSetsAndRemovesNodeLabels, StrategicMergePatchMergesLabelsAndSetsUnschedulable,
    AMergePatchReplacesTheTaintList, AWriteFromAStaleResourceVersionIsAConflict,
    AJsonPatchTestGuardsTheValueNotTheVersion, CreatingAnExistingNameIsAlreadyExists,
    LabelAndFieldSelectorsSelectPods, APagedListReducesEveryItemAndLeavesOutThoseReducedToNull,
    AWatchAfterTheListSeesEveryChangeAndSelectorTransitions,
    APodOnANodeIsTerminatingUntilDeletedWithGraceZero, APodOnNoNodeIsDeletedAtOnce,
    AnEvictionTheBudgetForbidsIs429WithTheBudgetAsCause, APendingPodIsEvictedWhateverItsBudget,
    EvictingAPodThatIsGoneIs404, AnEventAboutTheNodeIsRecordedInDefault,
    AnAccessReviewIsAnsweredWithoutStoringAnything, AResourceClaimThatIsNotThereIsNotFound,
    AnEvictedPodCarriesTheDisruptionTargetCondition, ABudgetWithAnEmptySelectorCoversEveryPodOfItsNamespace,
    AnUnreadyPodGoesUnderAlwaysAllowWhateverTheBudget, AResourceClaimKeepsItsAllocationAndReservedFor,
    ResourceSlicesAreSelectedByNodeAndDriver, ARuntimeClassIsReadWithItsHandler,
    ADaemonSetPodStaysUnderANoScheduleTaintAndGoesUnderNoExecute);

}  // namespace dm::test::contract
