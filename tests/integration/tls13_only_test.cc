// driver-manager and node-sim against an API server that accepts only TLS 1.3 (as OpenShift's "Modern" TLS
// profile configures it): the full uninstall_driver run, with workloads to evict and operands to bring back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "fixtures/uninstall/fixture.h"
#include "kube/config.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;

class Tls13Only : public UninstallSuite {
 public:
  static void SetUpTestSuite() {
    setenv("K8S_APISERVER_ARGS", "--tls-min-version=VersionTLS13", 1);  // NOLINT(concurrency-mt-unsafe)
    UninstallSuite::SetUpTestSuite();
    unsetenv("K8S_APISERVER_ARGS");  // NOLINT(concurrency-mt-unsafe)
  }
};

// `openssl s_client` to the API server with one protocol version: whether the handshake completed.
bool handshake_with(const TestCluster& c, const std::string& version_flag) {
  auto config = kube::load_kubeconfig(c.kubeconfig());
  if (!config) throw std::runtime_error(config.error().message);
  const std::string server = config->server.substr(std::string("https://").size());
  const auto out = run_command({"openssl", "s_client", "-connect", server, version_flag, "-brief"}, "");
  return out.exit_code == 0;
}

TEST_F(Tls13Only, UninstallDriverRunsToTheEndAgainstATls13OnlyApiServer) {
  ASSERT_FALSE(handshake_with(cluster(), "-tls1_2")) << "the API server must refuse TLS 1.2";
  ASSERT_TRUE(handshake_with(cluster(), "-tls1_3"));

  // node-sim (the kubelet's part) speaks to the same server: its pods run.
  Scenario s(cluster(), "modern");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 1);
  write_file(s.sim_path("/run/nvidia/nvidia-driver.state"), "digest-old\n");

  auto r = s.run(sa_kubeconfig());

  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_THAT(r.log, HasSubstr("evicting pod " + s.workload_ns() + "/trainer-"));
  EXPECT_THAT(r.log, HasSubstr("Driver uninstallation completed successfully"));
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "nvidia module still loaded";
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
}

}  // namespace
}  // namespace dm::test::uninstall
