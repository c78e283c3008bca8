// Exec credential plugins: the ExecCredential read back and handed over (kube/exec_credential), running
// the plugin (kube/exec_plugin) and the credentials kept and renewed (kube/exec_source), with small plugin
// scripts written into a temporary directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "kube/exec_credential.h"
#include "kube/exec_plugin.h"
#include "kube/exec_source.h"
#include "support/doubles.h"
#include "support/process.h"

namespace dm::kube {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kV1 = "client.authentication.k8s.io/v1";
constexpr const char* kV1beta1 = "client.authentication.k8s.io/v1beta1";

std::string credential(const std::string& status, const std::string& version = kV1) {
  return R"({"apiVersion":")" + version + R"(","kind":"ExecCredential","status":)" + status + "}";
}

// ---- the ExecCredential ----

TEST(ExecCredentialTest, ATokenWithItsExpiry) {
  auto c = parse_exec_credential(
      credential(R"({"token":"tok","expirationTimestamp":"2026-12-01T00:00:00Z"})"), kV1);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->token, "tok");
  EXPECT_EQ(c->client_cert_pem, "");
  ASSERT_TRUE(c->expires.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*c->expires), 1796083200);
}

TEST(ExecCredentialTest, AClientCertificateAndKeyWithoutExpiry) {
  auto c = parse_exec_credential(
      credential(R"({"clientCertificateData":"CERT PEM","clientKeyData":"KEY PEM"})", kV1beta1), kV1beta1);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->token, "");
  EXPECT_EQ(c->client_cert_pem, "CERT PEM");
  EXPECT_EQ(c->client_key_pem, "KEY PEM");
  EXPECT_FALSE(c->expires.has_value());
}

TEST(ExecCredentialTest, WhatIsWrongWithABadOneIsSaid) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "its output is not a JSON object"},
      {"[1]", "its output is not a JSON object"},
      {"", "its output is not a JSON object"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"Pod","status":{"token":"t"}})",
       "of kind \"Pod\""},
      {credential(R"({"token":"t"})", kV1beta1),
       "apiVersion \"client.authentication.k8s.io/v1beta1\", but the kubeconfig asks for "
       "client.authentication.k8s.io/v1"},
      {R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"})", "has no status"},
      {credential("\"t\""), "status is not an object"},
      {credential("{}"), "neither a token nor clientCertificateData and clientKeyData"},
      {credential(R"({"token":7})"), "status.token is not a string"},
      {credential(R"({"clientCertificateData":"C"})"), "clientCertificateData but no clientKeyData"},
      {credential(R"({"clientKeyData":"K"})"), "clientKeyData but no clientCertificateData"},
      {credential(R"({"token":"t","expirationTimestamp":"tomorrow"})"),
       "expirationTimestamp \"tomorrow\" is not an RFC 3339 time"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    auto c = parse_exec_credential(text, kV1);
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(c.error().message, HasSubstr(want));
  }
}

TEST(ExecCredentialTest, Rfc3339Times) {
  const auto at = [](const char* s) {
    auto t = parse_rfc3339(s);
    return t ? std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count() : -1;
  };
  EXPECT_EQ(at("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(at("2026-12-01T00:00:00Z"), 1796083200000);
  EXPECT_EQ(at("2026-12-01T00:00:00.250Z"), 1796083200250);
  EXPECT_EQ(at("2026-12-01T02:00:00+02:00"), 1796083200000);
  EXPECT_EQ(at("2026-11-30T23:30:00-00:30"), 1796083200000);
  for (const char* bad : {"", "2026-12-01", "2026-12-01T00:00:00", "2026-13-01T00:00:00Z",
                          "2026-12-01T00:00:00.Z", "2026-12-01T00:00:00Zjunk", "2026-12-01T00:00:00+0200",
                          "2026-12-01 00:00:00Z", "2026-12-0aT00:00:00Z",
                          // beyond what the clock's nanosecond count holds
                          "9999-12-01T00:00:00Z", "0001-01-01T00:00:00Z"}) {
    EXPECT_FALSE(parse_rfc3339(bad).has_value()) << bad;
  }
}

Config exec_config(ExecConfig exec) {
  Config c;
  c.server = "https://10.0.0.1:6443";
  c.ca_data = "CA PEM";
  c.exec = std::move(exec);
  return c;
}

TEST(ExecCredentialTest, ExecInfoHasTheClusterOnlyWhenThePluginAsks) {
  auto plain = exec_info(exec_config({.command = "p", .api_version = kV1}));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(Json::parse(*plain),
            Json::parse(R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
                            "spec":{"interactive":false}})"));

  auto with = exec_info(exec_config({.command = "p",
                                     .api_version = kV1beta1,
                                     .provide_cluster_info = true,
                                     .cluster_config = R"({"audience":"gpu"})"}));
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(Json::parse(*with), Json::parse(R"({"apiVersion":"client.authentication.k8s.io/v1beta1",
      "kind":"ExecCredential","spec":{"interactive":false,"cluster":{"server":"https://10.0.0.1:6443",
      "certificate-authority-data":"Q0EgUEVN","config":{"audience":"gpu"}}}})"));
}

// ---- running plugins ----

class ExecPluginTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("dm-exec"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A /bin/sh script named `name` in the test's directory.
  std::string plugin(const std::string& name, const std::string& body) {
    std::string path = dir_ + "/" + name;
    test::write_file(path, "#!/bin/sh\n" + body);
    ::chmod(path.c_str(), 0755);
    return path;
  }
  // A plugin that counts its runs in the file `runs` and prints token-<run> expiring at `expiry` (none
  // when empty).
  std::string counting_plugin(const std::string& expiry = "") {
    const std::string exp = expiry.empty() ? "" : R"(,"expirationTimestamp":")" + expiry + "\"";
    return plugin("counting", "n=$(cat '" + dir_ + "/runs' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '" +
                                  dir_ + "/runs'\nprintf '%s' '" +
                                  credential(R"({"token":"token-'$n'")" + exp + "}") + "'\n");
  }
  [[nodiscard]] int runs() const {
    std::ifstream in(dir_ + "/runs");
    int n = 0;
    in >> n;
    return n;
  }
  std::string token(ExecCredentialSource& source) {
    auto c = source.current();
    return c ? c->token : "error: " + c.error().message;
  }

  std::string dir_;
  test::FakeClock clock_;
  SystemClock real_clock_;
};

TEST_F(ExecPluginTest, ThePluginGetsItsArgumentsEnvironmentAndExecInfo) {
  ExecConfig e{.command = plugin("p", "printf '%s|%s|%s' \"$1$2\" \"$REGION\" \"$KUBERNETES_EXEC_INFO\"\n"),
               .args = {"get-", "token"},
               .env = {{"REGION", "eu"}},
               .api_version = kV1};
  auto out = run_exec_plugin(e, R"({"kind":"ExecCredential"})", clock_, 10s);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, R"(get-token|eu|{"kind":"ExecCredential"})");
}

TEST_F(ExecPluginTest, AFailingPluginsStatusAndStandardErrorAreInTheError) {
  ExecConfig e{.command = plugin("p", "echo 'not logged in; run login' >&2\nexit 3\n"), .api_version = kV1};
  auto out = run_exec_plugin(e, "{}", clock_, 10s);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message,
            "exec credential plugin \"" + e.command + "\": exited with status 3: not logged in; run login");
}

TEST_F(ExecPluginTest, AMissingCommandNamesItAndTheInstallHint) {
  ExecConfig e{.command = "dm-no-such-plugin", .api_version = kV1, .install_hint = "Install it with apt.\n"};
  auto out = run_exec_plugin(e, "{}", clock_, 10s);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.error().message,
              HasSubstr("exec credential plugin \"dm-no-such-plugin\": cannot be started"));
  EXPECT_THAT(out.error().message, HasSubstr("; Install it with apt."));
}

TEST_F(ExecPluginTest, AHangingPluginIsKilledAfterItsLimit) {
  // The child `sleep` keeps the pipe open: it is killed with the script (a process group of its own).
  ExecConfig e{.command = plugin("p", "sleep 600\n"), .api_version = kV1};
  auto out = run_exec_plugin(e, "{}", real_clock_, 300ms);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message,
            "exec credential plugin \"" + e.command + "\": still running after 0.3 s; killed");
}

TEST_F(ExecPluginTest, ATokenIsKeptUntilItExpiresThenThePluginRunsAgain) {
  // The fake clock's wall time starts at 2026-11-30T22:00:00Z.
  ExecCredentialSource source(
      exec_config({.command = counting_plugin("2026-11-30T23:00:00Z"), .api_version = kV1}), clock_);
  EXPECT_EQ(runs(), 0) << "nothing runs before a request needs credentials";
  EXPECT_EQ(token(source), "token-1");
  clock_.advance(59min);
  EXPECT_EQ(token(source), "token-1");
  EXPECT_EQ(runs(), 1);
  clock_.advance(1min);
  EXPECT_EQ(token(source), "token-2") << "expired at 23:00";
  EXPECT_EQ(runs(), 2);
}

TEST_F(ExecPluginTest, ATokenWithoutExpiryIsKeptUntilA401) {
  ExecCredentialSource source(exec_config({.command = counting_plugin(), .api_version = kV1}), clock_);
  EXPECT_EQ(token(source), "token-1");
  clock_.advance(24h);
  EXPECT_EQ(token(source), "token-1");
  EXPECT_TRUE(source.renew_after_unauthorized({.token = "token-1"}));
  EXPECT_EQ(token(source), "token-2");
  // A second request rejected with the old token finds the renewal done: no third run.
  EXPECT_TRUE(source.renew_after_unauthorized({.token = "token-1"}));
  EXPECT_EQ(runs(), 2);
}

TEST_F(ExecPluginTest, APluginThatKeepsGivingTheRejectedTokenCannotHelp) {
  ExecCredentialSource source(
      exec_config({.command = plugin("p", "printf '%s' '" + credential(R"({"token":"same"})") + "'\n"),
                   .api_version = kV1}),
      clock_);
  EXPECT_EQ(token(source), "same");
  EXPECT_FALSE(source.renew_after_unauthorized({.token = "same"}));
}

TEST_F(ExecPluginTest, AClientCertificateIsHandedOn) {
  ExecCredentialSource source(
      exec_config(
          {.command = plugin(
               "p", "printf '%s' '" +
                        credential(R"({"clientCertificateData":"CERT","clientKeyData":"KEY"})", kV1beta1) +
                        "'\n"),
           .api_version = kV1beta1}),
      clock_);
  auto c = source.current();
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(*c, (Credentials{.token = "", .client_cert_pem = "CERT", .client_key_pem = "KEY"}));
}

TEST_F(ExecPluginTest, GarbageOrAnotherApiVersionIsAnErrorNamingTheCommand) {
  const std::string garbage = plugin("garbage", "echo hello\n");
  ExecCredentialSource a(exec_config({.command = garbage, .api_version = kV1}), clock_);
  EXPECT_EQ(token(a), "error: exec credential plugin \"" + garbage +
                          "\": its output is not a JSON object (an ExecCredential)");

  const std::string old = plugin("old", "printf '%s' '" + credential(R"({"token":"t"})", kV1beta1) + "'\n");
  ExecCredentialSource b(exec_config({.command = old, .api_version = kV1}), clock_);
  EXPECT_THAT(token(b), HasSubstr("exec credential plugin \"" + old +
                                  "\": it returned an ExecCredential of apiVersion "
                                  "\"client.authentication.k8s.io/v1beta1\""));
}

TEST_F(ExecPluginTest, AFailedRunIsRetriedAtTheNextRequest) {
  const std::string flag = dir_ + "/ready";
  ExecCredentialSource source(
      exec_config({.command = plugin("p", "[ -f '" + flag +
                                              "' ] || { echo 'no session' >&2; exit 1; }\nprintf '%s' '" +
                                              credential(R"({"token":"t"})") + "'\n"),
                   .api_version = kV1}),
      clock_);
  EXPECT_THAT(token(source), HasSubstr("exited with status 1: no session"));
  test::write_file(flag, "");
  EXPECT_EQ(token(source), "t");
}

}  // namespace
}  // namespace dm::kube
