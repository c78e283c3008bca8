#include "manager/commands/preflight.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "kube/client.h"
#include "support/doubles.h"
#include "support/process.h"

namespace dm::manager {
namespace {

bool mentions(const std::vector<std::string>& problems, const std::string& text) {
  for (const auto& p : problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(Preflight, NamespaceNamesFollowDns1123Labels) {
  EXPECT_TRUE(is_dns1123_label("gpu-operator"));
  EXPECT_TRUE(is_dns1123_label("a"));
  EXPECT_FALSE(is_dns1123_label("Bad_NS!"));
  EXPECT_FALSE(is_dns1123_label("-lead"));
  EXPECT_FALSE(is_dns1123_label("trail-"));
  EXPECT_FALSE(is_dns1123_label(""));
  EXPECT_FALSE(is_dns1123_label(std::string(64, 'a')));
}

TEST(Preflight, LabelKeysAreQualifiedNames) {
  EXPECT_TRUE(is_qualified_name("example.com/gpu-agent"));
  EXPECT_TRUE(is_qualified_name("gpu_agent.v2"));
  EXPECT_FALSE(is_qualified_name("bad key!"));
  EXPECT_FALSE(is_qualified_name("Example.com/x"));  // the prefix is a DNS subdomain: lower case
  EXPECT_FALSE(is_qualified_name("example.com/"));
  EXPECT_FALSE(is_qualified_name("a/b/c"));
  EXPECT_FALSE(is_qualified_name(std::string(64, 'a')));
}

TEST(Preflight, ExecutablesResolveByPathOrThroughPath) {
  const std::string dir = test::make_temp_dir("dm-preflight");
  const std::string tool = dir + "/vfio-manage";
  std::ofstream(tool) << "#!/bin/sh\n";
  ::chmod(tool.c_str(), 0755);
  const std::string plain = dir + "/not-executable";
  std::ofstream(plain) << "x";
  EXPECT_EQ(resolve_executable("vfio-manage", "/nonexistent:" + dir), tool);
  EXPECT_EQ(resolve_executable(tool, ""), tool);
  EXPECT_EQ(resolve_executable("vfio-manage", "/nonexistent"), "");
  EXPECT_EQ(resolve_executable(plain, ""), "");
  EXPECT_EQ(resolve_executable(dir, ""), "") << "a directory is no executable";
}

TEST(Preflight, SettingsProblemsNameEachVariable) {
  Settings s;
  s.node_name = "n";
  s.operator_namespace = "Bad_NS!";
  s.node_label_for_gpu_pod_eviction = "bad key!";
  s.sim_root = "/nonexistent/sim-root";
  s.vfio_manage = "/nonexistent/vfio-manage";
  const auto problems = settings_problems(s, "/usr/bin");
  EXPECT_EQ(problems.size(), 4U);
  EXPECT_TRUE(mentions(problems, "OPERATOR_NAMESPACE=\"Bad_NS!\""));
  EXPECT_TRUE(mentions(problems, "NODE_LABEL_FOR_GPU_POD_EVICTION=\"bad key!\""));
  EXPECT_TRUE(mentions(problems, "DRIVER_MANAGER_SIM_ROOT=\"/nonexistent/sim-root\""));
  EXPECT_TRUE(mentions(problems, "VFIO_MANAGE_PATH=\"/nonexistent/vfio-manage\""));

  Settings good;
  good.vfio_manage = "sh";
  EXPECT_TRUE(settings_problems(good, "/bin:/usr/bin").empty());
}

TEST(Preflight, AccessChecksFollowTheSettings) {
  Settings s;
  s.node_name = "gpu-1";
  auto has = [](const std::vector<AccessCheck>& checks, const std::string& what) {
    for (const auto& c : checks) {
      if (c.describe() == what) return true;
    }
    return false;
  };
  const auto base = uninstall_access_checks(s, false);
  EXPECT_TRUE(has(base, "patch nodes"));
  EXPECT_TRUE(has(base, "list pods"));
  EXPECT_FALSE(has(base, "watch pods")) << "optional: the pod watch falls back to re-listing without it";
  EXPECT_TRUE(has(base, "create pods/eviction"));
  EXPECT_TRUE(has(base, "get daemonsets.apps"));
  EXPECT_FALSE(has(base, "get resourceclaims.resource.k8s.io"));
  EXPECT_TRUE(has(uninstall_access_checks(s, true), "get resourceclaims.resource.k8s.io"))
      << "the run GETs each claim a pod names: a get-only role passes, a list-only one is refused";
  EXPECT_FALSE(has(uninstall_access_checks(s, true), "list resourceclaims.resource.k8s.io"));
  s.enable_gpu_pod_eviction = false;
  s.enable_auto_drain = false;
  EXPECT_FALSE(has(uninstall_access_checks(s, false), "get daemonsets.apps"));
}

// An API server that cannot answer the reviews: the check is skipped with one line naming the first
// question's error (as when they were asked one by one), and the run goes on.
TEST(Preflight, UnansweredAccessReviewsSkipTheCheckWithOneLine) {
  kube::Config config;
  config.server = "https://127.0.0.1:1";  // nothing listens there
  config.insecure_skip_tls_verify = true;
  kube::ClientOptions options;
  options.retry_for = std::chrono::milliseconds(0);
  auto client = kube::Client::create(config, options);
  ASSERT_TRUE(client) << client.error().message;
  Settings s;
  s.node_name = "gpu-1";
  test::LogCapture log;
  EXPECT_TRUE(check_access(**client, uninstall_access_checks(s, /*dra_on=*/true)));
  const std::string text = log.text();
  const std::string line = "Could not ask the API server about permissions up front";
  ASSERT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find(line), text.rfind(line)) << "one line, not one per review:\n" << text;
  EXPECT_NE(text.find("selfsubjectaccessreviews"), std::string::npos) << text;
}

}  // namespace
}  // namespace dm::manager
