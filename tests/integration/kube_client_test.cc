// The Kubernetes client against a real control plane: every verb, selectors, paging, errors, eviction,
// events, and list_watch (events, done, deadline, cancel, resume, re-list after 410).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/objects.h"
#include "manager/node/known_node.h"
#include "manager/node/node_ops.h"
#include "manager/node/taint_ops.h"
#include "support/cluster.h"
#include "support/doubles.h"
#include "support/process.h"

namespace dm::kube {

using Json = nlohmann::json;
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;
using namespace std::chrono_literals;

std::string cm_path(const std::string& ns, const std::string& name = {}) {
  return "/api/v1/namespaces/" + ns + "/configmaps" + (name.empty() ? "" : "/" + name);
}

Json configmap(const std::string& name, const std::map<std::string, std::string>& labels = {},
               const std::map<std::string, std::string>& data = {}) {
  Json cm = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}};
  if (!labels.empty()) cm["metadata"]["labels"] = labels;
  if (!data.empty()) cm["data"] = data;
  return cm;
}

// A client that tries a request the server does not answer again for `budget` (zero: never again).
ClientOptions retrying(std::chrono::milliseconds budget, std::chrono::milliseconds base = 200ms,
                       std::chrono::milliseconds max = 10000ms) {
  ClientOptions o;
  o.retry_for = budget;
  o.retry_base = base;
  o.retry_max = max;
  return o;
}

std::vector<std::string> names_of(const std::vector<Json>& items) {
  std::vector<std::string> out;
  out.reserve(items.size());
  for (const auto& i : items) out.push_back(name(i));
  return out;
}

class KubeClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = test::TestCluster::start().release(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  void SetUp() override {
    auto cfg = load_kubeconfig(cluster_->kubeconfig());
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    config_ = *cfg;
    client_ = make_client(config_);
  }

  static std::unique_ptr<Client> make_client(const Config& cfg, ClientOptions opts = {}) {
    auto c = Client::create(cfg, std::move(opts));
    if (!c.ok()) throw std::runtime_error(c.error().message);
    return std::move(*c);
  }

  // A fresh namespace whose default ServiceAccount exists (pods are refused before it does).
  static std::string make_namespace(const std::string& ns) {
    auto out = cluster_->kubectl({"create", "namespace", ns});
    if (out.exit_code != 0) throw std::runtime_error(out.err);
    test::eventually([&] {
      auto sa = cluster_->kubectl(
          {"-n", ns, "get", "serviceaccount", "default", "-o", "jsonpath={.metadata.name}"});
      return sa.exit_code == 0 && !sa.out.empty();
    });
    return ns;
  }

  static std::string env_value(const std::string& key) {
    auto out = test::run_command({test::source_path("scripts/cluster"), "env", cluster_->state_dir()});
    const std::string prefix = key + "=";
    size_t pos = 0;
    while (pos < out.out.size()) {
      auto nl = out.out.find('\n', pos);
      if (nl == std::string::npos) nl = out.out.size();
      std::string line = out.out.substr(pos, nl - pos);
      if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      pos = nl + 1;
    }
    throw std::runtime_error("scripts/cluster env has no " + key);
  }

  // Audit events of `verb` whose requestURI starts with `uri_prefix`.
  static std::vector<Json> audit(const std::string& verb, const std::string& uri_prefix) {
    std::vector<Json> out;
    for (auto& e : cluster_->audit_events()) {
      if (e.value("stage", "") != "ResponseComplete") continue;
      if (e.value("verb", "") == verb && e.value("requestURI", "").rfind(uri_prefix, 0) == 0)
        out.push_back(e);
    }
    return out;
  }

  void create_node(const std::string& node) {
    auto r = client_->create(paths::nodes(),
                             {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", node}}}});
    ASSERT_TRUE(r.ok() || r.error().conflict()) << r.error().message;
  }
  // Someone else's write to the node (label admin=mark): a copy read before it is stale.
  void write_elsewhere(const std::string& node) {
    ASSERT_TRUE(
        client_
            ->patch(paths::node(node), PatchType::kMerge, {{"metadata", {{"labels", {{"admin", "mark"}}}}}})
            .ok());
  }
  // A new node is written once more by the controller-manager's TTL controller (its ttl annotation); the
  // tests that count the requests of a write wait for that first.
  void create_settled_node(const std::string& node) {
    create_node(node);
    ASSERT_TRUE(test::eventually([&] {
      auto n = client_->get(paths::node(node));
      return n.ok() && annotation(*n, "node.alpha.kubernetes.io/ttl").has_value();
    })) << "the TTL controller never annotated node "
        << node;
  }
  Json create_pod(const std::string& ns, const std::string& pod, const std::string& node,
                  const std::map<std::string, std::string>& labels = {}) {
    Json p = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", pod}}},
              {"spec",
               {{"nodeName", node},
                {"automountServiceAccountToken", false},
                {"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
    if (!labels.empty()) p["metadata"]["labels"] = labels;
    auto r = client_->create(paths::pods(ns), p);
    if (!r.ok()) throw std::runtime_error(r.error().message);
    return *r;
  }
  // Running and Ready, as a kubelet would report: only such pods count as healthy for a PDB.
  void mark_ready(const std::string& ns, const std::string& pod) {
    auto r = client_->patch(paths::pod(ns, pod) + "/status", PatchType::kStrategicMerge,
                            Json::parse(R"({"status":{"phase":"Running","conditions":[
                                {"type":"Ready","status":"True"},{"type":"ContainersReady","status":"True"}]}})"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(pod_ready(*r));
  }

  // Two service accounts that may read config maps in `ns`; returns their tokens.
  static std::pair<std::string, std::string> two_tokens(const std::string& ns) {
    std::vector<std::string> tokens;
    for (const std::string sa : {"old", "new"}) {
      auto cfg = load_kubeconfig(cluster_->service_account_kubeconfig(ns, sa, "view"));
      if (!cfg.ok()) throw std::runtime_error(cfg.error().message);
      tokens.push_back(cfg->token);
    }
    return {tokens[0], tokens[1]};
  }
  // The configuration a pod gets: the token read at start, and the file it came from.
  [[nodiscard]] Config file_token_config(const std::string& file, const std::string& token) const {
    Config c = config_;
    c.client_cert_data.clear();
    c.client_key_data.clear();
    c.client_cert_file.clear();
    c.client_key_file.clear();
    c.token = token;
    c.token_file = file;
    test::write_file(file, token + "\n");
    return c;
  }
  // Revokes a service account's bound tokens by deleting the account (the API server checks that the account
  // a token is bound to still exists).
  static void revoke(const std::string& ns, const std::string& sa) {
    auto del = cluster_->kubectl({"-n", ns, "delete", "serviceaccount", sa});
    ASSERT_EQ(del.exit_code, 0) << del.err;
  }
  // The user of the audited `list` requests of config maps in `ns` ("" for rejected ones).
  static std::vector<std::string> list_users(const std::string& ns) {
    std::vector<std::string> users;
    for (const auto& e : audit("list", cm_path(ns))) {
      users.push_back(e.contains("user") ? e["user"].value("username", "") : "");
    }
    return users;
  }

  static test::TestCluster* cluster_;
  Config config_;
  std::unique_ptr<Client> client_;
};

test::TestCluster* KubeClientTest::cluster_ = nullptr;

// ---- verbs ----

TEST_F(KubeClientTest, CreateGetPatchRemove) {
  const std::string ns = make_namespace("crud");
  auto created = client_->create(cm_path(ns), configmap("a", {{"app", "x"}}, {{"k1", "v1"}, {"k2", "v2"}}));
  ASSERT_TRUE(created.ok()) << created.error().message;
  EXPECT_EQ(name(*created), "a");
  EXPECT_FALSE(uid(*created).empty());

  auto got = client_->get(cm_path(ns, "a"));
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ((*got)["data"]["k1"], "v1");
  EXPECT_EQ(uid(*got), uid(*created));

  // A merge patch that names the current resourceVersion.
  auto guarded = client_->patch(
      cm_path(ns, "a"), PatchType::kMerge,
      {{"metadata", {{"resourceVersion", resource_version(*got)}}}, {"data", {{"k1", "v1-updated"}}}});
  ASSERT_TRUE(guarded.ok()) << guarded.error().message;
  EXPECT_EQ((*guarded)["data"]["k1"], "v1-updated");

  // Strategic merge: labels merge.
  auto sm = client_->patch(cm_path(ns, "a"), PatchType::kStrategicMerge,
                           {{"metadata", {{"labels", {{"tier", "t"}}}}}});
  ASSERT_TRUE(sm.ok()) << sm.error().message;
  EXPECT_EQ(label(*sm, "app"), "x");
  EXPECT_EQ(label(*sm, "tier"), "t");
  // Merge patch: null deletes a key.
  auto mp = client_->patch(cm_path(ns, "a"), PatchType::kMerge, {{"data", {{"k2", nullptr}, {"k3", "v3"}}}});
  ASSERT_TRUE(mp.ok()) << mp.error().message;
  EXPECT_FALSE((*mp)["data"].contains("k2"));
  EXPECT_EQ((*mp)["data"]["k3"], "v3");
  // JSON patch: a list of operations.
  auto jp = client_->patch(cm_path(ns, "a"), PatchType::kJsonPatch,
                           Json::parse(R"([{"op":"add","path":"/metadata/annotations","value":{"note":"n"}},
                                           {"op":"remove","path":"/data/k1"}])"));
  ASSERT_TRUE(jp.ok()) << jp.error().message;
  EXPECT_EQ(annotation(*jp, "note"), "n");
  EXPECT_FALSE((*jp)["data"].contains("k1"));

  // What the server has now, read back independently.
  const Json live = cluster_->get_json({"-n", ns, "configmap", "a"});
  EXPECT_EQ(live["data"], Json({{"k3", "v3"}}));
  EXPECT_EQ(label(live, "tier"), "t");

  // Delete with a UID precondition that does not match: 409, and the object stays.
  DeleteOptions wrong_uid;
  wrong_uid.uid = "00000000-0000-0000-0000-000000000000";
  auto refused = client_->remove(cm_path(ns, "a"), wrong_uid);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.error().conflict()) << refused.error().message;
  EXPECT_EQ(refused.error().reason, "Conflict");
  EXPECT_THAT(refused.error().message,
              HasSubstr("the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match"));
  EXPECT_TRUE(client_->get(cm_path(ns, "a")).ok());

  DeleteOptions right;
  right.uid = uid(*created);
  right.grace_period_seconds = 0;
  right.propagation_policy = "Background";
  auto removed = client_->remove(cm_path(ns, "a"), right);
  ASSERT_TRUE(removed.ok()) << removed.error().message;

  auto gone = client_->get(cm_path(ns, "a"));
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(gone.error().not_found());
  EXPECT_EQ(gone.error().reason, "NotFound");
  EXPECT_EQ(gone.error().message,
            "GET /api/v1/namespaces/crud/configmaps/a: configmaps \"a\" not found (404 NotFound)");
}

TEST_F(KubeClientTest, ConflictOnDuplicateCreateAndStalePatch) {
  const std::string ns = make_namespace("conflicts");
  ASSERT_TRUE(client_->create(cm_path(ns), configmap("dup")).ok());
  auto again = client_->create(cm_path(ns), configmap("dup"));
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(again.error().conflict());
  EXPECT_EQ(again.error().reason, "AlreadyExists");
  EXPECT_THAT(again.error().message,
              HasSubstr("POST /api/v1/namespaces/conflicts/configmaps: configmaps \"dup\" "
                        "already exists (409 AlreadyExists)"));

  auto v1 = client_->get(cm_path(ns, "dup"));
  ASSERT_TRUE(v1.ok());
  ASSERT_TRUE(client_->patch(cm_path(ns, "dup"), PatchType::kMerge, {{"data", {{"a", "1"}}}}).ok());
  // A merge patch that names the old resourceVersion.
  const Json stale = {{"metadata", {{"resourceVersion", resource_version(*v1)}}}, {"data", {{"b", "2"}}}};
  const uint64_t before = client_->request_count();
  auto put = client_->patch(cm_path(ns, "dup"), PatchType::kMerge, stale);
  ASSERT_FALSE(put.ok());
  EXPECT_TRUE(put.error().conflict());
  EXPECT_EQ(put.error().reason, "Conflict");
  EXPECT_THAT(put.error().message, HasSubstr("the object has been modified"));
  EXPECT_EQ(client_->request_count() - before, 1U) << "a 409 is the caller's to handle, not retried";
}

TEST_F(KubeClientTest, LabelAndFieldSelectors) {
  const std::string ns = make_namespace("selectors");
  ASSERT_TRUE(client_->create(cm_path(ns), configmap("s1", {{"app", "gpu"}, {"tier", "a"}})).ok());
  ASSERT_TRUE(client_->create(cm_path(ns), configmap("s2", {{"app", "gpu"}, {"tier", "b"}})).ok());
  ASSERT_TRUE(client_->create(cm_path(ns), configmap("s3", {{"app", "cpu"}})).ok());

  ListOptions by_label;
  by_label.label_selector = "app=gpu";
  auto l = client_->list_all(cm_path(ns), by_label);
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_THAT(names_of(*l), UnorderedElementsAre("s1", "s2"));
  for (const auto& item : *l) EXPECT_EQ(item.value("kind", ""), "ConfigMap");  // filled in from the List

  by_label.label_selector = "app in (gpu,cpu),tier!=b";  // needs percent-encoding
  l = client_->list_all(cm_path(ns), by_label);
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_THAT(names_of(*l), UnorderedElementsAre("s1", "s3"));

  ListOptions by_field;
  by_field.field_selector = "metadata.name=s2";
  l = client_->list_all(cm_path(ns), by_field);
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_THAT(names_of(*l), ElementsAre("s2"));

  ListOptions both;
  both.label_selector = "app=gpu";
  both.field_selector = "metadata.name!=s1";
  l = client_->list_all(cm_path(ns), both);
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_THAT(names_of(*l), ElementsAre("s2"));

  ListOptions bad;
  bad.field_selector = "spec.nosuchfield=x";
  auto err = client_->list_all(cm_path(ns), bad);
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().http_status, 400);
  EXPECT_EQ(err.error().reason, "BadRequest");
}

TEST_F(KubeClientTest, PagingWithLimitAndContinue) {
  const std::string ns = make_namespace("paging");
  std::set<std::string> want;
  for (int i = 0; i < 7; ++i) {
    const std::string n = "p" + std::to_string(i);
    ASSERT_TRUE(client_->create(cm_path(ns), configmap(n, {{"paged", "yes"}})).ok());
    want.insert(n);
  }
  ListOptions o;
  o.label_selector = "paged=yes";
  o.limit = 3;
  const uint64_t before = client_->request_count();
  auto all = client_->list_all(cm_path(ns), o);
  ASSERT_TRUE(all.ok()) << all.error().message;
  EXPECT_EQ(client_->request_count() - before, 3U);  // pages of 3, 3 and 1
  const auto names = names_of(*all);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), want);
  EXPECT_EQ(names.size(), 7U);
}

// ---- authentication variants and errors ----

// list_identities keeps of each item only what names it (and follows the pages like list_all): the labels,
// data and the rest of every object are dropped while the response is parsed.
TEST_F(KubeClientTest, ListIdentitiesKeepsOnlyWhatNamesEachObjectAcrossPages) {
  const std::string ns = make_namespace("identities");
  std::set<std::string> want;
  for (int i = 0; i < 5; ++i) {
    const std::string n = "id" + std::to_string(i);
    ASSERT_TRUE(client_->create(cm_path(ns), configmap(n, {{"listed", "yes"}})).ok());
    want.insert(n);
  }
  ListOptions o;
  o.label_selector = "listed=yes";
  o.limit = 2;
  const uint64_t before = client_->request_count();
  auto ids = client_->list_identities(cm_path(ns), o);
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(client_->request_count() - before, 3U);  // pages of 2, 2 and 1
  const auto names = names_of(*ids);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), want);
  for (const auto& item : *ids) {
    std::set<std::string> keys;
    for (const auto& [k, v] : item.items()) keys.insert(k);
    EXPECT_EQ(keys, (std::set<std::string>{"apiVersion", "kind", "metadata"})) << item.dump();
    std::set<std::string> meta;
    for (const auto& [k, v] : item["metadata"].items()) meta.insert(k);
    EXPECT_EQ(meta, (std::set<std::string>{"name", "namespace", "uid"})) << item.dump();
    EXPECT_FALSE(item["metadata"].value("uid", "").empty());
    EXPECT_EQ(item["metadata"].value("namespace", ""), ns);
  }
}

TEST_F(KubeClientTest, FileBasedCredentialsAndTokenFile) {
  const std::string& dir = cluster_->state_dir();
  const std::string server = config_.server;
  const std::string ca = env_value("K8S_CA_FILE");
  const std::string cert = env_value("K8S_CLIENT_CERT");
  const std::string key = env_value("K8S_CLIENT_KEY");
  const std::string token_file = env_value("K8S_TOKEN_FILE");
  const std::string kc = dir + "/files.kubeconfig";
  test::write_file(
      kc, "clusters:\n- name: c\n  cluster:\n    server: " + server + "\n    certificate-authority: " + ca +
              "\nusers:\n- name: cert\n  user:\n    client-certificate: " + cert +
              "\n    client-key: " + key + "\n- name: tok\n  user:\n    tokenFile: " + token_file +
              "\ncontexts:\n- name: cert\n  context: {cluster: c, user: cert}\n"
              "- name: tok\n  context: {cluster: c, user: tok}\ncurrent-context: cert\n");
  for (const std::string ctx : {"cert", "tok"}) {
    auto cfg = load_kubeconfig(kc, ctx);
    ASSERT_TRUE(cfg.ok()) << cfg.error().message;
    auto c = make_client(*cfg);
    auto nodes = c->get(paths::nodes());
    EXPECT_TRUE(nodes.ok()) << ctx << ": " << nodes.error().message;
  }
}

// ---- token rotation: the kubelet rewrites a pod's service-account token file while the program runs ----

TEST_F(KubeClientTest, TokenRotationA401ReReadsTheTokenFileAndRepeatsTheRequestOnce) {
  const std::string ns = make_namespace("token-401");
  const auto [old_token, new_token] = two_tokens(ns);
  const std::string file = cluster_->state_dir() + "/token-401";
  ClientOptions opts;
  opts.token_refresh = 24h;  // only a 401 makes it read the file again
  auto c = make_client(file_token_config(file, old_token), opts);
  ASSERT_TRUE(c->list_all(cm_path(ns)).ok());

  // The old token stops working and the file does not have a new one yet: the 401 is returned, once.
  revoke(ns, "old");
  ASSERT_TRUE(test::eventually([&] {
    auto r = c->list_all(cm_path(ns));
    return !r.ok() && r.error().unauthorized();
  }));
  uint64_t before = c->request_count();
  auto refused = c->list_all(cm_path(ns));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.error().unauthorized()) << refused.error().message;
  EXPECT_EQ(c->request_count() - before, 1U) << "an unchanged token file is no reason to repeat";

  // The kubelet rotates the file: the next request is rejected, re-reads it and goes through.
  test::write_file(file, new_token + "\n");
  before = c->request_count();
  auto listed = c->list_all(cm_path(ns));
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  EXPECT_EQ(c->request_count() - before, 2U) << "one rejected request, one repeated with the new token";
  ASSERT_TRUE(test::eventually([&] {
    const auto users = list_users(ns);
    return !users.empty() && users.back() == "system:serviceaccount:" + ns + ":new";
  }));
}

TEST_F(KubeClientTest, TokenRotationTheTokenFileIsReadAgainPeriodically) {
  const std::string ns = make_namespace("token-period");
  const auto [old_token, new_token] = two_tokens(ns);
  const std::string file = cluster_->state_dir() + "/token-period";
  ClientOptions opts;
  opts.token_refresh = 0ms;  // due at every request
  auto c = make_client(file_token_config(file, old_token), opts);
  ASSERT_TRUE(c->list_all(cm_path(ns)).ok());
  test::write_file(file, new_token + "\n");
  const uint64_t before = c->request_count();
  ASSERT_TRUE(c->list_all(cm_path(ns)).ok());
  EXPECT_EQ(c->request_count() - before, 1U) << "no 401 needed: the new token was picked up before sending";
  ASSERT_TRUE(test::eventually([&] { return list_users(ns).size() == 2; }));
  EXPECT_THAT(list_users(ns),
              ElementsAre("system:serviceaccount:" + ns + ":old", "system:serviceaccount:" + ns + ":new"));
}

TEST_F(KubeClientTest, TokenRotationAWatchOutlivesItsToken) {
  const std::string ns = make_namespace("token-watch");
  const auto tokens = two_tokens(ns);
  const std::string old_token = tokens.first;  // named copies: lambdas capture them
  const std::string new_token = tokens.second;
  const std::string file = cluster_->state_dir() + "/token-watch";
  ClientOptions opts;
  opts.token_refresh = 24h;
  auto c = make_client(file_token_config(file, old_token), opts);
  std::vector<std::string> seen;
  bool rotated = false;
  WatchHandlers h;
  h.on_sync = [&](const std::vector<Json>&) {
    // Mid-run: the old token is revoked and the file rotated; the next watch request (each lasts 1 s) is
    // rejected, re-reads the file and goes on with the new token.
    revoke(ns, "old");
    test::write_file(file, new_token + "\n");
    rotated = true;
  };
  h.on_event = [&](const WatchEvent& e) { seen.push_back(e.type + " " + name(e.object)); };
  std::thread creator;
  h.done = [&] {
    if (rotated && !creator.joinable()) {
      creator = std::thread([&] {
        // The API server caches a token's success for a few seconds: wait until the old one is refused, and
        // then for a renewal of the watch (each request lasts 1 s), before the change it must see.
        Config fixed = file_token_config(file + ".probe", old_token);
        fixed.token_file.clear();
        auto probe = make_client(fixed, retrying(0ms));
        EXPECT_TRUE(test::eventually([&] {
          auto r = probe->list_all(cm_path(ns));
          return !r.ok() && r.error().unauthorized();
        }));
        std::this_thread::sleep_for(1500ms);
        EXPECT_TRUE(client_->create(cm_path(ns), configmap("after-rotation")).ok());
      });
    }
    return !seen.empty();
  };
  h.tick = 100ms;
  ListOptions o;
  o.timeout_seconds = 1;
  auto st = c->list_watch(cm_path(ns), o, h, Deadline::after(SystemClock(), 60s));
  if (creator.joinable()) creator.join();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_THAT(seen, ElementsAre("ADDED after-rotation"));
  std::vector<Json> watches;
  ASSERT_TRUE(test::eventually([&] {
    watches = audit("watch", cm_path(ns));
    return !watches.empty() &&
           watches.back()["user"].value("username", "") == "system:serviceaccount:" + ns + ":new";
  }));
}

TEST_F(KubeClientTest, TlsVerification) {
  Config unverified = config_;
  unverified.ca_data.clear();  // only the system's trust anchors, which do not include the cluster's CA
  auto c = make_client(unverified, retrying(0ms));
  auto r = c->get(paths::nodes());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, 0);
  EXPECT_THAT(r.error().message, AllOf(HasSubstr("request to the API server " + config_.server + " failed"),
                                       HasSubstr("certificate")));

  Config insecure = unverified;
  insecure.ca_file.clear();
  insecure.insecure_skip_tls_verify = true;
  auto c2 = make_client(insecure);
  auto r2 = c2->get(paths::nodes());
  EXPECT_TRUE(r2.ok()) << r2.error().message;
}

TEST_F(KubeClientTest, ForbiddenForALeastPrivilegeServiceAccount) {
  const std::string ns = make_namespace("rbac");
  // "view" lets the account read config maps but not create them, and not read nodes (cluster-scoped).
  const std::string kc = cluster_->service_account_kubeconfig(ns, "viewer", "view");
  auto cfg = load_kubeconfig(kc);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->ns, ns);
  EXPECT_FALSE(cfg->token.empty());
  auto sa = make_client(*cfg);
  auto listed = sa->list_all(cm_path(ns));
  ASSERT_TRUE(listed.ok()) << listed.error().message;

  const uint64_t before = sa->request_count();
  auto denied = sa->create(cm_path(ns), configmap("nope"));
  ASSERT_FALSE(denied.ok());
  EXPECT_TRUE(denied.error().forbidden());
  EXPECT_EQ(denied.error().reason, "Forbidden");
  EXPECT_THAT(denied.error().message,
              AllOf(HasSubstr("POST /api/v1/namespaces/rbac/configmaps: "),
                    HasSubstr("system:serviceaccount:rbac:viewer"),
                    HasSubstr("cannot create resource \"configmaps\""), HasSubstr("(403 Forbidden)")));
  EXPECT_EQ(sa->request_count() - before, 1U);
  auto nodes = sa->get(paths::nodes());
  ASSERT_FALSE(nodes.ok());
  EXPECT_TRUE(nodes.error().forbidden());
}

TEST_F(KubeClientTest, ConnectionErrorsAreRetriedThenReported) {
  Config dead = config_;
  dead.server = "https://127.0.0.1:1";  // nothing listens there
  auto c = make_client(dead, retrying(300ms, 10ms, 50ms));
  auto r = c->get(paths::nodes());
  ASSERT_FALSE(r.ok());
  EXPECT_GE(c->request_count(), 2U) << "tried again within its budget";
  EXPECT_TRUE(r.error().unanswered) << "given up at the deadline, not at the first failure";
  EXPECT_THAT(r.error().message,
              AllOf(HasSubstr("GET /api/v1/nodes: request to the API server https://127.0.0.1:1 failed"),
                    HasSubstr("gave up at the deadline")));
}

TEST_F(KubeClientTest, CancelAbortsRetries) {
  Config dead = config_;
  dead.server = "https://127.0.0.1:1";
  ClientOptions opts = retrying(std::chrono::minutes(10), 1000ms, 1000ms);
  const CancelToken cancel = opts.cancel;
  auto c = make_client(dead, opts);
  std::thread t([&] {
    std::this_thread::sleep_for(300ms);
    cancel.cancel();
  });
  auto r = c->get(paths::nodes());
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "GET /api/v1/nodes: cancelled");
  EXPECT_LT(c->request_count(), 10U);
}

TEST_F(KubeClientTest, RequestTimeoutApplies) {
  ClientOptions opts = retrying(0ms);
  opts.request_timeout = 1ms;  // not even a TLS handshake fits
  auto c = make_client(config_, opts);
  auto r = c->get(paths::nodes());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().http_status, 0);
  EXPECT_THAT(r.error().message,
              AllOf(HasSubstr("GET /api/v1/nodes: request to the API server"), HasSubstr("timed out")));
}

TEST_F(KubeClientTest, ExceptionFromAWatchHandlerPropagates) {
  const std::string ns = make_namespace("watch-throw");
  WatchHandlers h;
  h.on_sync = [&](const std::vector<Json>&) {
    ASSERT_TRUE(client_->create(cm_path(ns), configmap("boom")).ok());
  };
  h.on_event = [](const WatchEvent&) { throw std::runtime_error("handler failed"); };
  EXPECT_THROW((void)client_->list_watch(cm_path(ns), {}, h, Deadline::after(SystemClock(), 30s)),
               std::runtime_error);
  // The client is still usable afterwards.
  EXPECT_TRUE(client_->get(cm_path(ns, "boom")).ok());
}

TEST_F(KubeClientTest, ConcurrentRequestsShareTheClient) {
  const std::string ns = make_namespace("threads");
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const std::string n = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (!client_->create(cm_path(ns), configmap(n, {{"made-by", "threads"}})).ok()) ++failures;
        if (!client_->get(cm_path(ns, n)).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(client_->request_count(), 40U);
  ListOptions o;
  o.label_selector = "made-by=threads";
  auto all = client_->list_all(cm_path(ns), o);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 20U);
}

// ---- eviction and events ----

TEST_F(KubeClientTest, EvictWithoutBudgetMakesThePodTerminating) {
  const std::string ns = make_namespace("evict-free");
  create_node("evict-node-1");
  create_pod(ns, "victim", "evict-node-1");
  mark_ready(ns, "victim");
  const uint64_t before = client_->request_count();
  auto st = client_->evict(ns, "victim");
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(client_->request_count() - before, 2U);  // discovery + the eviction
  auto pod = client_->get(paths::pod(ns, "victim"));
  ASSERT_TRUE(pod.ok()) << pod.error().message;  // no kubelet: it stays, terminating
  EXPECT_TRUE(terminating(*pod));

  create_pod(ns, "second", "evict-node-1");
  const uint64_t before2 = client_->request_count();
  ASSERT_TRUE(client_->evict(ns, "second").ok());
  EXPECT_EQ(client_->request_count() - before2, 1U);  // discovery is cached

  // A pod that does not exist.
  auto missing = client_->evict(ns, "ghost");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.error().not_found()) << missing.error().message;
}

TEST_F(KubeClientTest, BudgetBlocksEvictionWith429AndNoRetry) {
  const std::string ns = make_namespace("evict-pdb");
  create_node("evict-node-2");
  for (const char* p : {"g1", "g2"}) {
    create_pod(ns, p, "evict-node-2", {{"app", "guarded"}});
    mark_ready(ns, p);
  }
  cluster_->apply(
      "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: guard\n  namespace: " + ns +
      "\nspec:\n  minAvailable: 2\n  selector:\n    matchLabels:\n      app: guarded\n");
  // The disruption controller must have counted the healthy pods.
  ASSERT_TRUE(test::eventually([&] {
    auto pdb = client_->get("/apis/policy/v1/namespaces/" + ns + "/poddisruptionbudgets/guard");
    if (!pdb.ok()) return false;
    const Json* healthy = find(*pdb, {"status", "currentHealthy"});
    return healthy != nullptr && healthy->get<int>() == 2;
  }));

  ClientOptions opts = retrying(1000ms, 10ms, 20ms);
  auto c = make_client(config_, opts);
  const uint64_t before = c->request_count();
  auto st = c->evict(ns, "g1");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.error().too_many_requests()) << st.error().message;
  EXPECT_EQ(st.error().reason, "TooManyRequests");
  EXPECT_THAT(st.error().message,
              AllOf(HasSubstr("POST /api/v1/namespaces/evict-pdb/pods/g1/eviction: "),
                    HasSubstr("disruption budget"), HasSubstr("guard"), HasSubstr("(429 TooManyRequests)")));
  EXPECT_TRUE(st.error().has_cause("DisruptionBudget")) << "callers classify on the cause, not the text";
  EXPECT_EQ(c->request_count() - before, 2U) << "discovery + one POST: a PDB 429 is the caller's to retry";
  auto pod = client_->get(paths::pod(ns, "g1"));
  ASSERT_TRUE(pod.ok());
  EXPECT_FALSE(terminating(*pod));
}

TEST_F(KubeClientTest, EventsGoToTheObjectsNamespaceOrDefault) {
  const std::string ns = make_namespace("events");
  create_node("event-node");
  auto node = client_->get(paths::node("event-node"));
  ASSERT_TRUE(node.ok());
  auto st = client_->create_event(*node, "DriverUnloaded", "the NVIDIA driver was unloaded", "Warning");
  ASSERT_TRUE(st.ok()) << st.error().message;
  Json pod = create_pod(ns, "evented", "event-node");
  ASSERT_TRUE(client_->create_event(pod, "GPUClientReset", "evicted for a driver upgrade").ok());

  ListOptions o;
  o.field_selector = "involvedObject.name=event-node";
  auto node_events = client_->list_all("/api/v1/namespaces/default/events", o);
  ASSERT_TRUE(node_events.ok()) << node_events.error().message;
  ASSERT_EQ(node_events->size(), 1U);
  const Json& ev = (*node_events)[0];
  EXPECT_EQ(ev["reason"], "DriverUnloaded");
  EXPECT_EQ(ev["message"], "the NVIDIA driver was unloaded");
  EXPECT_EQ(ev["type"], "Warning");
  EXPECT_EQ(ev["involvedObject"]["kind"], "Node");
  EXPECT_EQ(ev["involvedObject"]["uid"], uid(*node));
  EXPECT_EQ(ev["source"]["component"], "driver-manager");

  o.field_selector = "involvedObject.name=evented";
  auto pod_events = client_->list_all("/api/v1/namespaces/" + ns + "/events", o);
  ASSERT_TRUE(pod_events.ok()) << pod_events.error().message;
  ASSERT_EQ(pod_events->size(), 1U);
  EXPECT_EQ((*pod_events)[0]["type"], "Normal");
  EXPECT_EQ((*pod_events)[0]["involvedObject"]["namespace"], ns);
  EXPECT_EQ((*pod_events)[0]["involvedObject"]["kind"], "Pod");
}

TEST_F(KubeClientTest, ForbiddenEventsAreReportedOnceWithTheRuleToAddThenNotTried) {
  // The GPU Operator's stock role for the driver cannot create Events: the node's writer says so once.
  const std::string ns = make_namespace("events-rbac");
  create_node("events-rbac-node");
  auto cfg = load_kubeconfig(cluster_->service_account_kubeconfig(ns, "no-events", "view"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  auto sa = make_client(*cfg);
  const SystemClock clock;
  manager::NodeOps node(*sa, clock, CancelToken{}, "events-rbac-node");
  test::LogCapture log;
  node.event("DriverUninstallFailed", "first", "Warning");
  node.event("DriverUninstallFailed", "second", "Warning");
  const std::string text = log.text();
  const std::string line =
      "info Not recording Kubernetes Events on node events-rbac-node: the service account may not create "
      "them; to have them, add this rule to its (Cluster)Role: {apiGroups: [\"\"], resources: [events], "
      "verbs: [create]}";
  EXPECT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find(line), text.rfind(line)) << "said once: " << text;
  std::vector<Json> posts;
  ASSERT_TRUE(test::eventually([&] {
    posts.clear();
    for (const auto& e : audit("create", "/api/v1/namespaces/default/events")) {
      if (e.contains("user") &&
          e["user"].value("username", "") == "system:serviceaccount:" + ns + ":no-events")
        posts.push_back(e);
    }
    return !posts.empty();
  }));
  EXPECT_EQ(posts.size(), 1U) << "no second attempt after the 403";
  EXPECT_EQ(posts[0]["responseStatus"].value("code", 0), 403);
}

// The guarded node writes may start from the newest node the run has seen instead of a GET. A stale copy
// costs a 409 and a read, never a wrong decision.
TEST_F(KubeClientTest, CordonFromAFreshKnownNodeWritesWithoutReading) {
  create_settled_node("known-fresh");
  const SystemClock clock;
  manager::KnownNode known;
  manager::NodeOps node(*client_, clock, CancelToken{}, "known-fresh");
  node.use_known_node(&known);
  ASSERT_TRUE(node.get().ok());  // remembered
  const uint64_t before = client_->request_count();
  auto c = node.cordon();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, manager::CordonOutcome::kCordoned);
  EXPECT_EQ(client_->request_count() - before, 1U) << "one PATCH, no GET";
  auto n = client_->get(paths::node("known-fresh"));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(node_unschedulable(*n));
  EXPECT_TRUE(manager::cordoned_by_us(*n));
  // The answer to the write is the copy now.
  auto copy = known.copy();
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(resource_version(*copy), resource_version(*n));
}

TEST_F(KubeClientTest, CordonFromAStaleKnownNodeReadsAgainAndKeepsTheOtherChange) {
  create_settled_node("known-stale");
  const SystemClock clock;
  manager::KnownNode known;
  manager::NodeOps node(*client_, clock, CancelToken{}, "known-stale");
  node.use_known_node(&known);
  ASSERT_TRUE(node.get().ok());
  write_elsewhere("known-stale");  // after the copy was taken
  test::LogCapture log;
  const uint64_t before = client_->request_count();
  auto c = node.cordon();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, manager::CordonOutcome::kCordoned);
  EXPECT_EQ(client_->request_count() - before, 3U) << "PATCH refused (409), GET, PATCH";
  auto n = client_->get(paths::node("known-stale"));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(node_unschedulable(*n));
  EXPECT_EQ(label(*n, "admin").value_or(""), "mark");
  const std::string text = log.text();
  ASSERT_NE(text.find("Cordoning node known-stale"), std::string::npos) << text;
  EXPECT_EQ(text.find("Cordoning node known-stale"), text.rfind("Cordoning node known-stale"))
      << "announced once: " << text;
  EXPECT_THAT(text, Not(HasSubstr("changed while cordoning"))) << text;
}

TEST_F(KubeClientTest, AKnownNodeThatLooksCordonedIsNotBelievedWithoutAFreshRead) {
  create_settled_node("known-looks-cordoned");
  const SystemClock clock;
  manager::KnownNode known;
  manager::NodeOps node(*client_, clock, CancelToken{}, "known-looks-cordoned");
  node.use_known_node(&known);
  auto fresh = node.get();
  ASSERT_TRUE(fresh.ok());
  Json stale = *fresh;
  stale["spec"]["unschedulable"] = true;  // an admin's cordon that is no longer there
  known.remember(stale);
  auto c = node.cordon();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, manager::CordonOutcome::kCordoned) << "decided on the node as it is, not on the copy";
  auto n = client_->get(paths::node("known-looks-cordoned"));
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(manager::cordoned_by_us(*n));
}

TEST_F(KubeClientTest, TaintFromKnownNodesFreshStaleAndMisleading) {
  const SystemClock clock;
  auto taint = manager::parse_taint("nvidia.com/gpu:NoSchedule");
  ASSERT_TRUE(taint.ok());
  const auto has_taint = [&](const std::string& name) {
    auto n = client_->get(paths::node(name));
    if (!n.ok()) return false;
    for (const auto& t : n->value("spec", Json::object()).value("taints", Json::array())) {
      if (t.value("key", "") == "nvidia.com/gpu" && t.value("effect", "") == "NoSchedule") return true;
    }
    return false;
  };
  {  // fresh: one PATCH
    create_settled_node("known-taint-fresh");
    manager::KnownNode known;
    manager::TaintOps ops(*client_, clock, CancelToken{}, "known-taint-fresh");
    ops.use_known_node(&known);
    auto n = client_->get(paths::node("known-taint-fresh"));
    ASSERT_TRUE(n.ok());
    known.remember(*n);
    const uint64_t before = client_->request_count();
    auto plan = ops.add(*taint);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->outcome, manager::TaintOutcome::kAdded);
    EXPECT_EQ(client_->request_count() - before, 1U);
    EXPECT_TRUE(has_taint("known-taint-fresh"));
    EXPECT_FALSE(plan->in_place_at.empty());
  }
  {  // stale: 409, GET, PATCH
    create_settled_node("known-taint-stale");
    manager::KnownNode known;
    manager::TaintOps ops(*client_, clock, CancelToken{}, "known-taint-stale");
    ops.use_known_node(&known);
    auto n = client_->get(paths::node("known-taint-stale"));
    ASSERT_TRUE(n.ok());
    known.remember(*n);
    write_elsewhere("known-taint-stale");
    const uint64_t before = client_->request_count();
    auto plan = ops.add(*taint);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(client_->request_count() - before, 3U);
    EXPECT_TRUE(has_taint("known-taint-stale"));
  }
  {  // a copy that shows the taint already ours: read before deciding to write nothing
    create_settled_node("known-taint-misleading");
    manager::KnownNode known;
    manager::TaintOps ops(*client_, clock, CancelToken{}, "known-taint-misleading");
    ops.use_known_node(&known);
    auto n = client_->get(paths::node("known-taint-misleading"));
    ASSERT_TRUE(n.ok());
    Json stale = *n;
    stale["spec"]["taints"] = Json::array({{{"key", "nvidia.com/gpu"}, {"effect", "NoSchedule"}}});
    stale["metadata"]["annotations"][std::string(manager::kTaintOwnerAnnotation)] = taint->to_string();
    known.remember(stale);
    auto plan = ops.add(*taint);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    EXPECT_EQ(plan->outcome, manager::TaintOutcome::kAdded);
    EXPECT_TRUE(has_taint("known-taint-misleading"));
  }
}

TEST_F(KubeClientTest, EvictionInATerminatingNamespaceIsForbiddenWithItsCause) {
  const std::string ns = make_namespace("evict-ns-gone");
  create_node("evict-node-3");
  create_pod(ns, "stays", "evict-node-3");  // no kubelet finishes it: the namespace stays Terminating
  auto del = cluster_->kubectl({"delete", "namespace", ns, "--wait=false"});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  auto st = client_->evict(ns, "stays");
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.error().forbidden()) << st.error().message;
  EXPECT_TRUE(st.error().has_cause("NamespaceTerminating")) << st.error().message;
  EXPECT_FALSE(st.error().has_cause("DisruptionBudget"));
}

// ---- list_watch ----

TEST_F(KubeClientTest, WatchSeesAddedModifiedDeleted) {
  const std::string ns = make_namespace("watch-basic");
  ASSERT_TRUE(client_->create(cm_path(ns), configmap("pre", {{"w", "1"}})).ok());
  ASSERT_TRUE(client_->create(cm_path(ns), configmap("unlabelled")).ok());
  std::vector<std::string> synced;
  std::vector<std::string> seen;
  bool finished = false;
  WatchHandlers h;
  // Each step of the script runs in a callback, so the order is deterministic.
  h.on_sync = [&](const std::vector<Json>& items) {
    synced = names_of(items);
    EXPECT_TRUE(client_->create(cm_path(ns), configmap("new", {{"w", "1"}})).ok());
    EXPECT_TRUE(client_->create(cm_path(ns), configmap("ignored")).ok());  // not selected
  };
  h.on_event = [&](const WatchEvent& e) {
    seen.push_back(e.type + " " + name(e.object));
    if (e.type == "ADDED") {
      EXPECT_TRUE(client_->patch(cm_path(ns, "new"), PatchType::kMerge, {{"data", {{"x", "y"}}}}).ok());
    } else if (e.type == "MODIFIED") {
      EXPECT_EQ(e.object["data"]["x"], "y");
      EXPECT_TRUE(client_->remove(cm_path(ns, "new")).ok());
    } else if (e.type == "DELETED") {
      finished = true;
    }
  };
  h.done = [&] { return finished; };
  ListOptions o;
  o.label_selector = "w=1";
  auto st = client_->list_watch(cm_path(ns), o, h, Deadline::after(SystemClock(), 60s));
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_THAT(synced, ElementsAre("pre"));
  EXPECT_THAT(seen, ElementsAre("ADDED new", "MODIFIED new", "DELETED new"));
}

TEST_F(KubeClientTest, WatchDoneIsCheckedOnTicksWithoutEvents) {
  const std::string ns = make_namespace("watch-tick");
  std::atomic<bool> flag{false};
  int syncs = 0;
  std::thread setter;
  WatchHandlers h;
  h.on_sync = [&](const std::vector<Json>&) {
    ++syncs;
    setter = std::thread([&flag] {
      std::this_thread::sleep_for(500ms);
      flag = true;
    });
  };
  h.done = [&] { return flag.load(); };
  h.tick = 100ms;
  auto st = client_->list_watch(cm_path(ns), {}, h, Deadline::after(SystemClock(), 60s));
  if (setter.joinable()) setter.join();
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_TRUE(flag.load());
  EXPECT_EQ(syncs, 1);
}

TEST_F(KubeClientTest, WatchDeadlineEndsWithTimedOut) {
  const std::string ns = make_namespace("watch-deadline");
  WatchHandlers h;
  h.done = [] { return false; };
  h.tick = 100ms;
  const SystemClock clock;
  auto st = client_->list_watch(cm_path(ns), {}, h, Deadline::after(clock, 1500ms));
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message,
              AllOf(HasSubstr("watch /api/v1/namespaces/watch-deadline/configmaps"), HasSubstr("timed out")));
}

TEST_F(KubeClientTest, WatchCancelEndsIt) {
  const std::string ns = make_namespace("watch-cancel");
  ClientOptions opts;
  const CancelToken cancel = opts.cancel;
  auto c = make_client(config_, opts);
  bool synced = false;
  WatchHandlers h;
  h.on_sync = [&](const std::vector<Json>&) { synced = true; };
  h.done = [] { return false; };
  h.tick = 5000ms;  // cancellation must not wait for a tick
  std::thread t([&] {
    std::this_thread::sleep_for(800ms);
    cancel.cancel();
  });
  auto st = c->list_watch(cm_path(ns), {}, h);  // no deadline
  t.join();
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(synced);
  EXPECT_THAT(st.error().message, HasSubstr("cancelled"));
}

TEST_F(KubeClientTest, WatchResumesAfterTheServerClosesTheStream) {
  const std::string ns = make_namespace("watch-resume");
  int syncs = 0;
  std::vector<std::string> seen;
  const SystemClock clock;
  TimePoint start{};
  int created = 0;
  WatchHandlers h;
  h.on_sync = [&](const std::vector<Json>&) {
    ++syncs;
    start = clock.now();
  };
  // Creates one object at a time, 1.5 s after the previous one was seen (1.5 s after the list for the first),
  // so each lands in a later watch request (each lasts 1 s) even when this callback runs late on a busy
  // machine.
  h.done = [&] {
    if (seen.size() == 3) return true;
    if (created == static_cast<int>(seen.size()) && created < 3 && clock.now() - start >= 1500ms) {
      EXPECT_TRUE(client_->create(cm_path(ns), configmap("r" + std::to_string(created++))).ok());
    }
    return false;
  };
  h.on_event = [&](const WatchEvent& e) {
    seen.push_back(e.type + " " + name(e.object));
    start = clock.now();
  };
  h.tick = 100ms;
  ListOptions o;
  o.timeout_seconds = 1;
  auto st = client_->list_watch(cm_path(ns), o, h, Deadline::after(clock, 60s));
  ASSERT_TRUE(st.ok()) << st.error().message;
  EXPECT_EQ(syncs, 1) << "a closed stream resumes the watch, it does not re-list";
  EXPECT_THAT(seen, ElementsAre("ADDED r0", "ADDED r1", "ADDED r2"));

  // The server saw several watch requests, later ones resuming from newer resourceVersions. A watch is
  // audited when it ends, and the last one ends when the client closes it, so its entry may come a moment
  // after the others: wait for the versions, not for a count of entries.
  const auto versions_seen = [&] {
    std::set<std::string> versions;
    for (const auto& w : audit("watch", "/api/v1/namespaces/" + ns + "/configmaps")) {
      const std::string uri = w["requestURI"];
      EXPECT_THAT(uri, HasSubstr("timeoutSeconds=1"));
      EXPECT_THAT(uri, HasSubstr("allowWatchBookmarks=true"));
      EXPECT_EQ(w.value("userAgent", ""), "driver-manager");
      const auto p = uri.find("resourceVersion=");
      EXPECT_NE(p, std::string::npos) << uri;
      if (p != std::string::npos) versions.insert(uri.substr(p, uri.find('&', p) - p));
    }
    return versions;
  };
  EXPECT_TRUE(test::eventually([&] { return versions_seen().size() >= 3; }))
      << "watch requests resumed from " << versions_seen().size() << " distinct resourceVersions, want 3";
  EXPECT_EQ(audit("list", "/api/v1/namespaces/" + ns + "/configmaps").size(), 1U);
}

TEST_F(KubeClientTest, WatchRelistsAfter410Gone) {
  // Events are served straight from etcd (the API server keeps no watch cache for them), so compacting etcd
  // makes a watch from an older resourceVersion fail with an ERROR event carrying 410 Expired.
  const std::string ns = make_namespace("watch-gone");
  const std::string etcd = env_value("K8S_ETCD_URL");
  Json involved = {
      {"kind", "ConfigMap"}, {"apiVersion", "v1"}, {"metadata", {{"name", "subject"}, {"namespace", ns}}}};
  ASSERT_TRUE(client_->create_event(involved, "First", "1").ok());
  std::vector<std::vector<std::string>> syncs;
  WatchHandlers h;
  h.on_sync = [&](const std::vector<Json>& items) {
    std::vector<std::string> reasons;
    reasons.reserve(items.size());
    for (const auto& i : items) reasons.push_back(i.value("reason", ""));
    std::sort(reasons.begin(), reasons.end());
    syncs.push_back(reasons);
    if (syncs.size() == 1) {
      // Before the watch starts: move on and compact away the history after the list's resourceVersion.
      EXPECT_TRUE(client_->create_event(involved, "Second", "2").ok());
      EXPECT_TRUE(client_->create_event(involved, "Third", "3").ok());
      auto status = test::run_command({"etcdctl", "--endpoints=" + etcd, "endpoint", "status", "-w", "json"},
                                      {}, {{"ETCDCTL_API", "3"}});
      ASSERT_EQ(status.exit_code, 0) << status.err;
      const auto rev = Json::parse(status.out)[0]["Status"]["header"]["revision"].get<int64_t>();
      auto compact = test::run_command({"etcdctl", "--endpoints=" + etcd, "compact", std::to_string(rev)}, {},
                                       {{"ETCDCTL_API", "3"}});
      ASSERT_EQ(compact.exit_code, 0) << compact.err;
    }
  };
  h.done = [&] { return syncs.size() == 2; };
  auto st =
      client_->list_watch("/api/v1/namespaces/" + ns + "/events", {}, h, Deadline::after(SystemClock(), 60s));
  ASSERT_TRUE(st.ok()) << st.error().message;
  ASSERT_EQ(syncs.size(), 2U);
  EXPECT_THAT(syncs[0], ElementsAre("First"));
  EXPECT_THAT(syncs[1], ElementsAre("First", "Second", "Third"));
  EXPECT_EQ(audit("list", "/api/v1/namespaces/" + ns + "/events").size(), 2U);
}

TEST_F(KubeClientTest, WatchForbiddenIsReturned) {
  const std::string ns = make_namespace("watch-rbac");
  const std::string kc = cluster_->service_account_kubeconfig(ns, "nobody", "system:basic-user");
  auto cfg = load_kubeconfig(kc);
  ASSERT_TRUE(cfg.ok());
  auto c = make_client(*cfg);
  WatchHandlers h;
  h.done = [] { return false; };
  auto st = c->list_watch(paths::pods(ns), {}, h, Deadline::after(SystemClock(), 30s));
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.error().forbidden()) << st.error().message;
}

}  // namespace
}  // namespace dm::kube
