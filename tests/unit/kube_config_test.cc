#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/binary.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "kube/config.h"
#include "support/process.h"

namespace dm::kube {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string b64(const std::string& s) {
  return YAML::EncodeBase64(reinterpret_cast<const unsigned char*>(s.data()), s.size());
}

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("kube-config"); }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& rel, const std::string& content) {
    const fs::path p = fs::path(dir_) / rel;
    fs::create_directories(p.parent_path());
    test::write_file(p.string(), content);
    return p.string();
  }

  // A kubeconfig with one cluster "c", one user "u" and contexts "main" (current) and "other".
  std::string kubeconfig(const std::string& cluster_fields, const std::string& user_fields,
                         const std::string& extra = {}) {
    return write("kube/config", "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n" +
                                    cluster_fields + "users:\n- name: u\n  user:\n" + user_fields +
                                    "contexts:\n- name: main\n  context:\n    cluster: c\n    user: u\n"
                                    "- name: other\n  context:\n    cluster: c\n    user: u\n"
                                    "    namespace: gpu-operator\n" +
                                    extra + "current-context: main\n");
  }

  std::string dir_;
};

TEST_F(KubeconfigTest, FilePathsResolveAgainstTheKubeconfigDirectory) {
  write("kube/ca.crt", "CA");
  write("kube/certs/admin.crt", "CERT");
  write("kube/certs/admin.key", "KEY");
  const auto path = kubeconfig("    server: https://127.0.0.1:6443/\n    certificate-authority: ca.crt\n",
                               "    client-certificate: certs/admin.crt\n    client-key: certs/admin.key\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://127.0.0.1:6443");  // trailing slash dropped
  const std::string base = (fs::absolute(dir_) / "kube").string();
  EXPECT_EQ(cfg->ca_file, base + "/ca.crt");
  EXPECT_EQ(cfg->client_cert_file, base + "/certs/admin.crt");
  EXPECT_EQ(cfg->client_key_file, base + "/certs/admin.key");
  EXPECT_TRUE(cfg->ca_data.empty());
  EXPECT_TRUE(cfg->token.empty());
  EXPECT_FALSE(cfg->insecure_skip_tls_verify);
  EXPECT_EQ(cfg->ns, "default");
  EXPECT_EQ(cfg->source, "kubeconfig " + path + " (context main)");
}

TEST_F(KubeconfigTest, AbsoluteFilePathsAreKept) {
  const auto ca = write("elsewhere/ca.pem", "CA");
  const auto path =
      kubeconfig("    server: https://h:1\n    certificate-authority: " + ca + "\n", "    token: t\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->ca_file, ca);
}

TEST_F(KubeconfigTest, DataFieldsAreBase64DecodedAndWinOverFiles) {
  const auto path = kubeconfig(
      "    server: https://h:1\n    certificate-authority-data: " + b64("-----CA PEM-----\n") +
          "\n    certificate-authority: missing.crt\n",
      "    client-certificate-data: " + b64("CERT PEM") + "\n    client-key-data: " + b64("KEY PEM") + "\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->ca_data, "-----CA PEM-----\n");
  EXPECT_EQ(cfg->client_cert_data, "CERT PEM");
  EXPECT_EQ(cfg->client_key_data, "KEY PEM");
  EXPECT_TRUE(cfg->ca_file.empty());
  EXPECT_TRUE(cfg->client_cert_file.empty());
  EXPECT_TRUE(cfg->client_key_file.empty());
}

TEST_F(KubeconfigTest, InlineToken) {
  auto cfg = load_kubeconfig(kubeconfig("    server: https://h:1\n", "    token: abc.def\n"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->token, "abc.def");
  EXPECT_TRUE(cfg->token_file.empty());
}

TEST_F(KubeconfigTest, TokenFileIsReadRelativeAndTrimmed) {
  write("kube/secrets/token", "  tok-123\n");
  auto cfg = load_kubeconfig(kubeconfig("    server: https://h:1\n", "    tokenFile: secrets/token\n"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->token, "tok-123");
  EXPECT_EQ(cfg->token_file, (fs::absolute(dir_) / "kube/secrets/token").string());
}

TEST_F(KubeconfigTest, InlineTokenWinsOverTokenFile) {
  auto cfg =
      load_kubeconfig(kubeconfig("    server: https://h:1\n", "    token: inline\n    tokenFile: nope\n"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->token, "inline");
}

TEST_F(KubeconfigTest, InsecureSkipTlsVerify) {
  auto cfg = load_kubeconfig(
      kubeconfig("    server: https://h:1\n    insecure-skip-tls-verify: true\n", "    token: t\n"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_TRUE(cfg->insecure_skip_tls_verify);
}

TEST_F(KubeconfigTest, InsecureSkipTlsVerifyWithACaIsRefused) {
  const auto path = kubeconfig(
      "    server: https://h:1\n    insecure-skip-tls-verify: true\n    certificate-authority-data: " +
          b64("CA") + "\n",
      "    token: t\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.error().message, "kubeconfig " + path +
                                     ": cluster \"c\" sets both insecure-skip-tls-verify and a certificate "
                                     "authority; with a CA, the server's certificate is checked: remove "
                                     "insecure-skip-tls-verify");
}

TEST_F(KubeconfigTest, TlsServerName) {
  auto cfg = load_kubeconfig(kubeconfig(
      "    server: https://10.0.0.1:6443\n    tls-server-name: kubernetes.default\n", "    token: t\n"));
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->tls_server_name, "kubernetes.default");
  EXPECT_EQ(load_kubeconfig(kubeconfig("    server: https://h:1\n", "    token: t\n"))->tls_server_name, "");
}

TEST_F(KubeconfigTest, ProxyUrlIsRefusedNotIgnored) {
  const auto path =
      kubeconfig("    server: https://h:1\n    proxy-url: http://proxy:3128\n", "    token: t\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message,
              HasSubstr("cluster \"c\" sets proxy-url, which driver-manager does not support"));
  EXPECT_THAT(cfg.error().message, HasSubstr("HTTPS_PROXY"));
}

TEST_F(KubeconfigTest, NamedContextAndItsNamespace) {
  const auto path = kubeconfig("    server: https://h:1\n", "    token: t\n");
  auto cfg = load_kubeconfig(path, "other");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->ns, "gpu-operator");
  EXPECT_EQ(cfg->source, "kubeconfig " + path + " (context other)");
  auto current = load_kubeconfig(path);
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(current->ns, "default");
}

TEST_F(KubeconfigTest, ContextWithoutUserIsAnonymous) {
  const auto path = write("kc", R"(clusters:
- name: c
  cluster: {server: "https://h:1"}
contexts:
- name: x
  context: {cluster: c}
current-context: x
)");
  auto cfg = load_kubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_TRUE(cfg->token.empty());
  EXPECT_TRUE(cfg->client_cert_file.empty());
}

// ---- errors: each names the file and what is wrong ----

TEST_F(KubeconfigTest, UnreadableFile) {
  const std::string path = dir_ + "/does-not-exist";
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path));
  EXPECT_THAT(cfg.error().message, HasSubstr("cannot read"));
  EXPECT_THAT(cfg.error().message, HasSubstr("No such file"));
}

TEST_F(KubeconfigTest, NotYaml) {
  const auto path = write("kc", "clusters: [unclosed\n  - {\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path + ": not valid YAML"));
}

TEST_F(KubeconfigTest, NotAMapping) {
  const auto path = write("kc", "just a string\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path + ": not a kubeconfig"));
}

TEST_F(KubeconfigTest, WrongShapeIsMalformed) {
  const auto path = write("kc", R"(clusters:
- name: c
  cluster: {server: [a, b]}
contexts:
- name: x
  context: {cluster: c}
current-context: x
)");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path + ": malformed"));
}

TEST_F(KubeconfigTest, NoCurrentContext) {
  const auto path = write("kc", "apiVersion: v1\nclusters: []\ncontexts: []\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path + ": no current-context"));
}

TEST_F(KubeconfigTest, ContextNotFound) {
  const auto path = kubeconfig("    server: https://h:1\n", "    token: t\n");
  auto cfg = load_kubeconfig(path, "nope");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.error().message, "kubeconfig " + path + ": context \"nope\" not found");
}

TEST_F(KubeconfigTest, ClusterNotFound) {
  const auto path = write("kc", R"(clusters: []
contexts:
- name: x
  context: {cluster: gone, user: u}
current-context: x
)");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.error().message, "kubeconfig " + path + ": cluster \"gone\" (of context \"x\") not found");
}

TEST_F(KubeconfigTest, UserNotFound) {
  const auto path = write("kc", R"(clusters:
- name: c
  cluster: {server: "https://h:1"}
contexts:
- name: x
  context: {cluster: c, user: ghost}
current-context: x
)");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.error().message, "kubeconfig " + path + ": user \"ghost\" (of context \"x\") not found");
}

TEST_F(KubeconfigTest, NoServer) {
  const auto path = kubeconfig("    insecure-skip-tls-verify: true\n", "    token: t\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.error().message, "kubeconfig " + path + ": cluster \"c\" has no server");
}

// Bytes outside the base64 alphabet, above 0x7f too (yaml-cpp's decoder would read outside its table).
TEST_F(KubeconfigTest, Base64WithBytesOutsideTheAlphabetIsAnError) {
  for (const std::string data : {"TFMwdExTMUNSVWRKVGlCRFJWSlVTVVpKUTBGVVJTMHRMUzB0\xc3\xa9",
                                 "\xe2\x82\xac"
                                 "AAAA"}) {
    const auto path = kubeconfig(
        "    server: https://h:1\n    certificate-authority-data: \"" + data + "\"\n", "    token: t\n");
    auto cfg = load_kubeconfig(path);
    ASSERT_FALSE(cfg.ok());
    EXPECT_THAT(cfg.error().message,
                HasSubstr("certificate-authority-data of cluster \"c\" is not valid base64"));
  }
}

TEST_F(KubeconfigTest, InvalidBase64) {
  const auto path = kubeconfig("    server: https://h:1\n    certificate-authority-data: '!!not base64!!'\n",
                               "    token: t\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path));
  EXPECT_THAT(cfg.error().message,
              HasSubstr("certificate-authority-data of cluster \"c\" is not valid base64"));
}

TEST_F(KubeconfigTest, MissingCaFile) {
  const auto path =
      kubeconfig("    server: https://h:1\n    certificate-authority: nope/ca.crt\n", "    token: t\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path));
  EXPECT_THAT(cfg.error().message, HasSubstr("certificate-authority of cluster \"c\""));
  EXPECT_THAT(cfg.error().message, HasSubstr("nope/ca.crt cannot be read"));
}

TEST_F(KubeconfigTest, UnreadableTokenFile) {
  const auto path = kubeconfig("    server: https://h:1\n", "    tokenFile: /nonexistent/token\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("kubeconfig " + path + ": tokenFile of user \"u\""));
  EXPECT_THAT(cfg.error().message, HasSubstr("/nonexistent/token"));
}

TEST_F(KubeconfigTest, CertificateWithoutKey) {
  const auto path =
      kubeconfig("    server: https://h:1\n", "    client-certificate-data: " + b64("C") + "\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.error().message, "kubeconfig " + path + ": user \"u\" has a client certificate but no key");
}

TEST_F(KubeconfigTest, ExecPluginIsReadWithEveryField) {
  const auto path = kubeconfig(
      "    server: https://h:1\n"
      "    extensions:\n    - name: client.authentication.k8s.io/exec\n      extension:\n"
      "        audience: gpu\n        retries: 3\n        quoted: \"3\"\n",
      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: bin/plugin\n"
      "      args: [get-token, --cluster, gpu]\n      env:\n      - name: REGION\n        value: eu\n"
      "      interactiveMode: Never\n      provideClusterInfo: true\n      installHint: install plugin\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  ASSERT_TRUE(cfg->exec.has_value());
  const ExecConfig& e = *cfg->exec;
  EXPECT_EQ(e.command, (fs::absolute(dir_) / "kube/bin/plugin").string()) << "relative to the kubeconfig";
  EXPECT_EQ(e.args, (std::vector<std::string>{"get-token", "--cluster", "gpu"}));
  ASSERT_EQ(e.env.size(), 1U);
  EXPECT_EQ(e.env[0], (std::pair<std::string, std::string>{"REGION", "eu"}));
  EXPECT_EQ(e.api_version, "client.authentication.k8s.io/v1");
  EXPECT_EQ(e.interactive_mode, InteractiveMode::kNever);
  EXPECT_TRUE(e.provide_cluster_info);
  EXPECT_EQ(e.install_hint, "install plugin");
  EXPECT_EQ(e.cluster_config, R"({"audience":"gpu","quoted":"3","retries":3})");
  EXPECT_EQ(cfg->token, "");
}

TEST_F(KubeconfigTest, ExecCommandWithoutASlashIsLookedUpOnThePath) {
  const auto path = kubeconfig("    server: https://h:1\n",
                               "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
                               "      command: gke-gcloud-auth-plugin\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->exec->command, "gke-gcloud-auth-plugin");
  EXPECT_EQ(cfg->exec->interactive_mode, InteractiveMode::kIfAvailable) << "v1beta1's default";
  EXPECT_EQ(cfg->exec->cluster_config, "");
}

TEST_F(KubeconfigTest, ExecPluginsThatCannotRunInAPodAreRefusedClearly) {
  const std::string v1 = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: p\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {v1, "has no interactiveMode, which client.authentication.k8s.io/v1 requires"},
      {v1 + "      interactiveMode: Always\n",
       "sets interactiveMode Always, but driver-manager runs in a pod"},
      {v1 + "      interactiveMode: Sometimes\n", "has interactiveMode \"Sometimes\""},
      {"    exec:\n      apiVersion: client.authentication.k8s.io/v1alpha1\n      command: p\n",
       "has apiVersion \"client.authentication.k8s.io/v1alpha1\"; driver-manager supports"},
      {"    exec:\n      command: p\n", "has apiVersion \"\""},
      {"    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n",
       "user \"u\" exec has no command"},
      {"    token: t\n" + v1 + "      interactiveMode: Never\n", "sets both exec and a token"},
      {v1 + "      interactiveMode: Never\n      env:\n      - value: x\n",
       "env has an entry without a name"},
  };
  for (const auto& [user, want] : cases) {
    SCOPED_TRACE(user);
    auto cfg = load_kubeconfig(kubeconfig("    server: https://h:1\n", user));
    ASSERT_FALSE(cfg.ok());
    EXPECT_THAT(cfg.error().message, HasSubstr(want));
  }
}

TEST_F(KubeconfigTest, AuthProviderIsRefusedNamingItsExecPlugin) {
  const auto path = kubeconfig("    server: https://h:1\n", "    auth-provider:\n      name: gcp\n");
  auto cfg = load_kubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("auth-provider plugin \"gcp\""));
  EXPECT_THAT(cfg.error().message, HasSubstr("gke-gcloud-auth-plugin"));
  EXPECT_THAT(cfg.error().message, HasSubstr("kubelogin"));
}

// ---- in-cluster ----

class InClusterTest : public KubeconfigTest {
 protected:
  void SetUp() override {
    KubeconfigTest::SetUp();
    for (const char* v : {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}) {
      if (const char* old = std::getenv(v)) saved_.emplace_back(v, old);
    }
  }
  void TearDown() override {
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
    KubeconfigTest::TearDown();
  }
  std::string sa_dir(bool with_namespace = true) {
    write("sa/token", "sa-token\n");
    write("sa/ca.crt", "CA");
    if (with_namespace) write("sa/namespace", "gpu-operator\n");
    return dir_ + "/sa";
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(InClusterTest, ReadsServiceAccountAndEnvironment) {
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  const auto dir = sa_dir();
  auto cfg = in_cluster_config(dir);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->token, "sa-token");
  EXPECT_EQ(cfg->token_file, dir + "/token");
  EXPECT_EQ(cfg->ca_file, dir + "/ca.crt");
  EXPECT_EQ(cfg->ns, "gpu-operator");
  EXPECT_EQ(cfg->source, "in-cluster");
  EXPECT_FALSE(cfg->insecure_skip_tls_verify);
}

TEST_F(InClusterTest, Ipv6HostIsBracketed) {
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
  auto cfg = in_cluster_config(sa_dir());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://[fd00::1]:6443");
}

TEST_F(InClusterTest, NamespaceDefaultsWhenFileIsMissing) {
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = in_cluster_config(sa_dir(false));
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->ns, "default");
}

TEST_F(InClusterTest, NotInAPod) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  auto cfg = in_cluster_config(sa_dir());
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("KUBERNETES_SERVICE_HOST"));
  EXPECT_THAT(cfg.error().message, HasSubstr("set KUBECONFIG"));
}

TEST_F(InClusterTest, MissingToken) {
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = in_cluster_config(dir_ + "/empty");
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(cfg.error().message, HasSubstr("in-cluster service-account token"));
  EXPECT_THAT(cfg.error().message, HasSubstr(dir_ + "/empty/token"));
}

TEST_F(InClusterTest, LoadConfigChoosesBySource) {
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  // With a path: that kubeconfig; without one, in-cluster (whose default SA dir does not exist here).
  const auto path = kubeconfig("    server: https://h:1\n", "    token: t\n");
  auto from_file = load_config(path);
  ASSERT_TRUE(from_file.ok()) << from_file.error().message;
  EXPECT_EQ(from_file->server, "https://h:1");
  auto in_cluster = load_config("");
  ASSERT_FALSE(in_cluster.ok());
  EXPECT_THAT(in_cluster.error().message, HasSubstr("/var/run/secrets/kubernetes.io/serviceaccount/token"));
}

}  // namespace
}  // namespace dm::kube
