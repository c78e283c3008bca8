// Exec credential plugins against a real control plane: a plugin prints a token of the API server's static
// token file (scripts/cluster adds exec-plugin-token for the user exec-user) and the client lists with it;
// a plugin whose first token the server rejects is run again after the 401; a token past its
// expirationTimestamp is not sent again (the plugin runs for a new one); a failing plugin's error names it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"
#include "kube/objects.h"
#include "support/cluster.h"
#include "support/process.h"

namespace dm::kube {
namespace {

using ::testing::HasSubstr;

constexpr const char* kToken = "exec-plugin-token";  // in the cluster's tokens.csv

std::string credential(const std::string& token) {
  return R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":")" +
         token + R"("}})";
}

class ExecPluginClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = test::TestCluster::start().release(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { dir_ = test::make_temp_dir("dm-exec-it"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A /bin/sh plugin in the test's directory.
  std::string plugin(const std::string& body) {
    std::string path = dir_ + "/plugin";
    test::write_file(path, "#!/bin/sh\n" + body);
    ::chmod(path.c_str(), 0755);
    return path;
  }

  // A kubeconfig for the test cluster whose user runs `command`.
  std::string kubeconfig(const std::string& command) {
    const auto server = cluster_->kubectl(
        {"config", "view", "--minify", "--raw", "-o", "jsonpath={.clusters[0].cluster.server}"});
    const auto ca = cluster_->kubectl({"config", "view", "--minify", "--raw", "-o",
                                       "jsonpath={.clusters[0].cluster.certificate-authority-data}"});
    std::string path = dir_ + "/kubeconfig";
    test::write_file(path, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " +
                               server.out + "\n    certificate-authority-data: " + ca.out +
                               "\nusers:\n- name: u\n  user:\n    exec:\n"
                               "      apiVersion: client.authentication.k8s.io/v1\n      command: " +
                               command +
                               "\n      interactiveMode: Never\n"
                               "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
                               "current-context: c\n");
    return path;
  }

  std::unique_ptr<Client> client(const std::string& command) {
    auto cfg = load_kubeconfig(kubeconfig(command));
    EXPECT_TRUE(cfg.ok()) << cfg.error().message;
    ClientOptions options;
    options.retry_for = std::chrono::milliseconds(0);
    auto c = Client::create(*cfg, options);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return std::move(*c);
  }

  static test::TestCluster* cluster_;
  std::string dir_;
};

test::TestCluster* ExecPluginClusterTest::cluster_ = nullptr;

bool lists_default(const std::vector<nlohmann::json>& namespaces) {
  return std::any_of(namespaces.begin(), namespaces.end(),
                     [](const nlohmann::json& ns) { return name(ns) == "default"; });
}

TEST_F(ExecPluginClusterTest, ThePluginsTokenListsNamespaces) {
  auto c = client(plugin("printf '%s' '" + credential(kToken) + "'\n"));
  auto namespaces = c->list_all("/api/v1/namespaces");
  ASSERT_TRUE(namespaces.ok()) << namespaces.error().message;
  EXPECT_TRUE(lists_default(*namespaces));
}

TEST_F(ExecPluginClusterTest, ARejectedTokenRunsThePluginAgain) {
  // The first run gives a token the server does not know (an expired one), the next the valid one.
  const std::string runs = dir_ + "/runs";
  auto c =
      client(plugin("if [ -f '" + runs + "' ]; then printf '%s' '" + credential(kToken) + "'; else touch '" +
                    runs + "'; printf '%s' '" + credential("expired-token") + "'; fi\n"));
  auto namespaces = c->list_all("/api/v1/namespaces");
  ASSERT_TRUE(namespaces.ok()) << namespaces.error().message;
  EXPECT_TRUE(lists_default(*namespaces));
}

TEST_F(ExecPluginClusterTest, AnExpiredTokenIsRenewedByRunningThePluginAgain) {
  // Each run appends a line to `runs` and hands out the valid token, expiring two seconds later.
  const std::string runs = dir_ + "/runs";
  const std::string script =
      "echo run >> '" + runs + "'\n" + "expiry=$(date -u -d '+2 seconds' +%Y-%m-%dT%H:%M:%SZ)\n" +
      R"(printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",)" +
      R"("status":{"token":"%s","expirationTimestamp":"%s"}}' ')" + kToken + "' \"$expiry\"\n";
  auto c = client(plugin(script));
  auto first = c->list_all("/api/v1/namespaces");
  ASSERT_TRUE(first.ok()) << first.error().message;
  auto again = c->list_all("/api/v1/namespaces");  // the token is still valid: no second run
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(test::read_file(runs), "run\n");
  std::this_thread::sleep_for(std::chrono::seconds(3));  // past the expiry
  auto after = c->list_all("/api/v1/namespaces");
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_TRUE(lists_default(*after));
  EXPECT_EQ(test::read_file(runs), "run\nrun\n") << "the expired token was used instead of a new one";
}

TEST_F(ExecPluginClusterTest, ATokenTheServerKeepsRejectingIsA401) {
  auto c = client(plugin("printf '%s' '" + credential("unknown-token") + "'\n"));
  auto namespaces = c->list_all("/api/v1/namespaces");
  ASSERT_FALSE(namespaces.ok());
  EXPECT_TRUE(namespaces.error().unauthorized()) << namespaces.error().message;
}

TEST_F(ExecPluginClusterTest, AFailingPluginsErrorNamesIt) {
  const std::string command = plugin("echo 'session expired; log in again' >&2\nexit 1\n");
  auto c = client(command);
  auto namespaces = c->list_all("/api/v1/namespaces");
  ASSERT_FALSE(namespaces.ok());
  EXPECT_THAT(namespaces.error().message,
              HasSubstr("exec credential plugin \"" + command +
                        "\": exited with status 1: session expired; log in again"));
}

}  // namespace
}  // namespace dm::kube
