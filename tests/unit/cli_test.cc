// Runs the driver-manager binary: exit codes and messages of the command line.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/options.h"
#include "support/process.h"

namespace dm {
namespace {

const char* kUnset = "\x01unset";

// The variables of the test runner's environment that would change the outcome.
std::map<std::string, std::string> clean_env(const std::map<std::string, std::string>& extra = {}) {
  std::map<std::string, std::string> env;
  // Every variable the program reads, so that the machine's environment cannot leak into a test.
  std::vector<std::string> vars = cli::environment_variables();
  vars.insert(vars.end(), {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"});
  for (const auto& v : vars) {
    env[v] = kUnset;
  }
  for (const auto& [k, v] : extra) env[k] = v;
  return env;
}

test::CommandOutput run(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), test::bin_path("driver-manager"));
  return test::run_command(args, {}, clean_env(env));
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

TEST(CliTest, VersionNeedsNoNodeName) {
  for (const char* flag : {"--version", "-v"}) {
    const auto r = run({flag});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(r.out.starts_with("driver-manager version ")) << r.out;
    EXPECT_TRUE(contains(r.out, ", tracks k8s-driver-manager v")) << r.out;
    EXPECT_EQ(r.err, "");
  }
}

// The reason of a failed run is the container's termination message: the last fatal line's text.
TEST(CliTest, AFailureLeavesItsReasonAsTheTerminationMessage) {
  const std::string dir = test::make_temp_dir("dm-termination");
  const std::string message = dir + "/termination-log";
  const auto r = run({"uninstall_driver"}, {{"NODE_NAME", "n1"},
                                            {"KUBECONFIG", dir + "/no-such-kubeconfig"},
                                            {"TERMINATION_MESSAGE_PATH", message}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string written = test::read_file(message);
  EXPECT_TRUE(written.starts_with("cannot load the Kubernetes client configuration: ")) << written;
  EXPECT_TRUE(contains(written, dir + "/no-such-kubeconfig")) << written;
  EXPECT_TRUE(contains(r.err, "level=fatal msg=" + written + "\n"))
      << "the same text as the log's fatal line:\n"
      << r.err;
  std::filesystem::remove_all(dir);
}

TEST(CliTest, ASuccessOrANonWritablePathLeavesNoMessageAndKeepsTheExitCode) {
  // (A folder whose name the program's messages cannot be confused with: they quote the kubeconfig's path.)
  const std::string dir = test::make_temp_dir("dm-cli-exit");
  const std::string message = dir + "/termination-log";
  auto r = run({"--version"}, {{"TERMINATION_MESSAGE_PATH", message}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(message));
  // Not in a pod: the default /dev/termination-log's folder may not be writable; nothing changes.
  r = run({"uninstall_driver"}, {{"NODE_NAME", "n1"},
                                 {"KUBECONFIG", dir + "/no-such-kubeconfig"},
                                 {"TERMINATION_MESSAGE_PATH", dir + "/no-such-dir/termination-log"}});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_FALSE(contains(r.err, "termination")) << "the unwritable path is no error of the run's:\n" << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/no-such-dir"));
  std::filesystem::remove_all(dir);
}

TEST(CliTest, HelpAndNoSubCommand) {
  auto r = run({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "uninstall_driver")) << r.out;
  EXPECT_TRUE(contains(r.out, "[$NODE_NAME]"));

  r = run({}, {{"NODE_NAME", "n1"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "GLOBAL OPTIONS:"));

  r = run({"help"}, {{"NODE_NAME", "n1"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "preflight_check"));
}

TEST(CliTest, UnknownSubCommand) {
  // As urfave/cli: its own line on stderr (no log line), nothing on stdout, exit 3.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"frobnicate"}, std::vector<std::string>{"help", "frobnicate"}}) {
    const auto r = run(args, {{"NODE_NAME", "n1"}});
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_EQ(r.err, "No help topic for 'frobnicate'\n");
    EXPECT_EQ(r.out, "");
  }
}

TEST(CliTest, LogLevelTraceAndUpperCaseAreAccepted) {
  for (const char* level : {"TRACE", "Warn", "panic"}) {
    const auto r = run({"--help"}, {{"LOG_LEVEL", level}});
    EXPECT_EQ(r.exit_code, 0) << level << ": " << r.err;
  }
  const auto bad = run({"--help"}, {{"LOG_LEVEL", "verbose"}});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "invalid log level \"verbose\"")) << bad.err;
}

TEST(CliTest, MissingNodeName) {
  for (const char* cmd : {"uninstall_driver", "preflight_check"}) {
    const auto r = run({cmd});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.out, "GLOBAL OPTIONS:")) << "help is shown";
    EXPECT_TRUE(contains(r.err, "level=fatal msg=Required flag \"node-name\" not set")) << r.err;
  }
}

TEST(CliTest, BadBoolEnvironmentValue) {
  const auto r = run({"uninstall_driver"}, {{"NODE_NAME", "n1"}, {"ENABLE_GPU_POD_EVICTION", "yes"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(
      contains(r.err,
               "level=fatal msg=could not parse \"yes\" as bool value from environment variable "
               "\"ENABLE_GPU_POD_EVICTION\" for flag enable-gpu-pod-eviction: strconv.ParseBool: parsing "
               "\"yes\": invalid syntax"))
      << r.err;
  EXPECT_FALSE(contains(r.err, "Starting driver uninstallation")) << "nothing ran";
}

TEST(CliTest, BadDurationEnvironmentValue) {
  const auto r = run({"uninstall_driver"}, {{"NODE_NAME", "n1"}, {"DRAIN_TIMEOUT_SECONDS", "5 minutes"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(
      contains(r.err,
               "level=fatal msg=could not parse \"5 minutes\" as duration value from environment variable "
               "\"DRAIN_TIMEOUT_SECONDS\" for flag drain-timeout-seconds: time: unknown unit \" minutes\" in "
               "duration \"5 minutes\""))
      << r.err;
  const auto r2 = run({"uninstall_driver"}, {{"NODE_NAME", "n1"}, {"OPERAND_WAIT_TIMEOUT", "soon"}});
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_TRUE(contains(r2.err, "time: invalid duration \"soon\"")) << r2.err;
}

TEST(CliTest, BadTaintAndLogFormat) {
  auto r = run({"uninstall_driver"}, {{"NODE_NAME", "n1"}, {"GPU_CLIENT_TAINT", "nvidia.com/gpu"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "GPU_CLIENT_TAINT")) << r.err;
  EXPECT_TRUE(contains(r.err, "key[=value]:effect")) << r.err;
  r = run({"uninstall_driver"}, {{"NODE_NAME", "n1"}, {"LOG_FORMAT", "xml"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "invalid log format \"xml\"")) << r.err;
}

TEST(CliTest, PreflightCheckNeedsALoadableConfig) {
  const std::string dir = test::make_temp_dir("dm-cli");
  auto r = run({"preflight_check"}, {{"NODE_NAME", "n1"}, {"KUBECONFIG", dir + "/missing"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "level=info msg=Performing preflight checks")) << r.err;
  EXPECT_TRUE(contains(r.err, "level=fatal msg=")) << r.err;
  EXPECT_TRUE(contains(r.err, dir + "/missing")) << r.err;
  EXPECT_FALSE(contains(r.err, "Preflight checks completed"));

  test::write_file(dir + "/kubeconfig", R"(apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: abc
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
)");
  r = run({"preflight_check"},
          {{"NODE_NAME", "n1"}, {"KUBECONFIG", dir + "/kubeconfig"}, {"LOG_FORMAT", "json"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, R"("msg":"Performing preflight checks")")) << r.err;
  EXPECT_TRUE(contains(r.err, R"("msg":"Preflight checks completed")")) << r.err;
}

TEST(CliTest, CustomLabelValueWarningIsLogged) {
  const std::string dir = test::make_temp_dir("dm-cli");
  const auto r = run({"preflight_check"}, {{"NODE_NAME", "n1"},
                                           {"NODE_LABEL_FOR_GPU_POD_EVICTION", "example.com/agent=on"},
                                           {"KUBECONFIG", dir + "/missing"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "level=warning msg=NODE_LABEL_FOR_GPU_POD_EVICTION=\"example.com/agent=on\""))
      << r.err;
}

}  // namespace
}  // namespace dm
