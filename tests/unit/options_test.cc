#include "cli/options.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/duration_text.h"

namespace dm::cli {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

const VersionInfo kVersion{"v1.2.3", "abc1234"};

struct Env {
  std::map<std::string, std::string> vars;
  [[nodiscard]] EnvLookup lookup() const {
    return [vars = vars](const std::string& name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
};

ParseResult parse(std::map<std::string, std::string> env,
                  std::vector<std::string> args = {"uninstall_driver"}) {
  args.insert(args.begin(), "driver-manager");
  return parse_options(args, Env{std::move(env)}.lookup(), kVersion);
}

ParseResult parse_with_node(std::map<std::string, std::string> env,
                            std::vector<std::string> args = {"uninstall_driver"}) {
  env.emplace("NODE_NAME", "gpu-node-1");
  return parse(std::move(env), std::move(args));
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

TEST(OptionsTest, DefaultsMatchUpstream) {
  const ParseResult r = parse_with_node({});
  ASSERT_FALSE(r.exit_now) << r.error;
  EXPECT_EQ(r.command, Command::kUninstallDriver);
  const auto& s = r.settings;
  EXPECT_EQ(s.node_name, "gpu-node-1");
  EXPECT_FALSE(s.drain_use_force);
  EXPECT_EQ(s.drain_pod_selector_label, "");
  EXPECT_EQ(s.drain_timeout, Duration::zero());
  EXPECT_FALSE(s.drain_delete_emptydir_data);
  EXPECT_TRUE(s.enable_auto_drain);
  EXPECT_TRUE(s.enable_gpu_pod_eviction);
  EXPECT_EQ(s.operator_namespace, "gpu-operator");
  EXPECT_EQ(s.node_label_for_gpu_pod_eviction, "");
  EXPECT_FALSE(s.gpu_direct_rdma_enabled);
  EXPECT_FALSE(s.use_host_mofed);
  EXPECT_EQ(s.kubeconfig, "");
  EXPECT_FALSE(s.force_reinstall);
  EXPECT_EQ(s.driver_config_digest, std::nullopt);
  EXPECT_EQ(s.operand_wait_timeout, minutes(5));
  EXPECT_EQ(s.gpu_client_eviction_timeout, minutes(5));
  EXPECT_EQ(s.gpu_client_taint, "nvidia.com/gpu:NoSchedule");
  EXPECT_EQ(s.mofed_wait_timeout, Duration::zero());
  EXPECT_FALSE(s.legacy_uncordon);
  EXPECT_EQ(s.sim_root, "");
  EXPECT_EQ(s.vfio_manage, "vfio-manage");
  EXPECT_EQ(r.log_format, LogFormat::kText);
  EXPECT_EQ(r.log_level, "info");
  EXPECT_TRUE(r.warnings.empty());
}

TEST(OptionsTest, EveryVariableIsRead) {
  const ParseResult r = parse_with_node({{"DRAIN_USE_FORCE", "true"},
                                         {"DRAIN_POD_SELECTOR_LABEL", "app=web"},
                                         {"DRAIN_TIMEOUT_SECONDS", "90s"},
                                         {"DRAIN_DELETE_EMPTYDIR_DATA", "1"},
                                         {"ENABLE_AUTO_DRAIN", "false"},
                                         {"ENABLE_GPU_POD_EVICTION", "F"},
                                         {"OPERATOR_NAMESPACE", "nvidia"},
                                         {"NODE_LABEL_FOR_GPU_POD_EVICTION", "example.com/gpu-agent"},
                                         {"GPU_DIRECT_RDMA_ENABLED", "T"},
                                         {"USE_HOST_MOFED", "TRUE"},
                                         {"KUBECONFIG", "/etc/kube.conf"},
                                         {"FORCE_REINSTALL", "True"},
                                         {"DRIVER_CONFIG_DIGEST", "sha256:abc"},
                                         {"LOG_FORMAT", "json"},
                                         {"LOG_LEVEL", "debug"},
                                         {"OPERAND_WAIT_TIMEOUT", "2m"},
                                         {"GPU_CLIENT_EVICTION_TIMEOUT", "45"},
                                         {"GPU_CLIENT_TAINT", "nvidia.com/gpu:NoSchedule"},
                                         {"MOFED_WAIT_TIMEOUT", "1h"},
                                         {"UNCORDON_ALWAYS", "t"},
                                         {"DRIVER_MANAGER_SIM_ROOT", "/tmp/sim"},
                                         {"VFIO_MANAGE_PATH", "/usr/bin/vfio-manage"}});
  ASSERT_FALSE(r.exit_now) << r.error;
  const auto& s = r.settings;
  EXPECT_TRUE(s.drain_use_force);
  EXPECT_EQ(s.drain_pod_selector_label, "app=web");
  EXPECT_EQ(s.drain_timeout, seconds(90));
  EXPECT_TRUE(s.drain_delete_emptydir_data);
  EXPECT_FALSE(s.enable_auto_drain);
  EXPECT_FALSE(s.enable_gpu_pod_eviction);
  EXPECT_EQ(s.operator_namespace, "nvidia");
  EXPECT_EQ(s.node_label_for_gpu_pod_eviction, "example.com/gpu-agent");
  EXPECT_TRUE(s.gpu_direct_rdma_enabled);
  EXPECT_TRUE(s.use_host_mofed);
  EXPECT_EQ(s.kubeconfig, "/etc/kube.conf");
  EXPECT_TRUE(s.force_reinstall);
  EXPECT_EQ(s.driver_config_digest, "sha256:abc");
  EXPECT_EQ(r.log_format, LogFormat::kJson);
  EXPECT_EQ(r.log_level, "debug");
  EXPECT_EQ(s.operand_wait_timeout, minutes(2));
  EXPECT_EQ(s.gpu_client_eviction_timeout, seconds(45));
  EXPECT_EQ(s.gpu_client_taint, "nvidia.com/gpu:NoSchedule");
  EXPECT_EQ(s.mofed_wait_timeout, hours(1));
  EXPECT_TRUE(s.legacy_uncordon);
  EXPECT_EQ(s.sim_root, "/tmp/sim");
  EXPECT_EQ(s.vfio_manage, "/usr/bin/vfio-manage");
}

TEST(OptionsTest, BoolEnvGoSyntaxAndEmptyIsFalse) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    const ParseResult r = parse_with_node({{"DRAIN_USE_FORCE", t}, {"ENABLE_AUTO_DRAIN", t}});
    ASSERT_FALSE(r.exit_now) << t;
    EXPECT_TRUE(r.settings.drain_use_force) << t;
    EXPECT_TRUE(r.settings.enable_auto_drain) << t;
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    const ParseResult r = parse_with_node({{"DRAIN_USE_FORCE", f}, {"ENABLE_AUTO_DRAIN", f}});
    ASSERT_FALSE(r.exit_now) << f;
    EXPECT_FALSE(r.settings.drain_use_force) << f;
    EXPECT_FALSE(r.settings.enable_auto_drain) << f;
  }
  // Set but empty: false, even where the default is true.
  const ParseResult r = parse_with_node({{"ENABLE_AUTO_DRAIN", ""}, {"ENABLE_GPU_POD_EVICTION", ""}});
  ASSERT_FALSE(r.exit_now);
  EXPECT_FALSE(r.settings.enable_auto_drain);
  EXPECT_FALSE(r.settings.enable_gpu_pod_eviction);
}

TEST(OptionsTest, BadBoolEnvIsAnErrorNamingVariableAndFlag) {
  struct Case {
    const char* var;
    const char* flag;
    const char* value;
  };
  const Case cases[] = {{"DRAIN_USE_FORCE", "drain-use-force", "yes"},
                        {"DRAIN_DELETE_EMPTYDIR_DATA", "drain-delete-emptydir-data", "on"},
                        {"ENABLE_AUTO_DRAIN", "enable-auto-drain", " true"},
                        {"ENABLE_GPU_POD_EVICTION", "enable-gpu-pod-eviction", "tRUE"},
                        {"GPU_DIRECT_RDMA_ENABLED", "gpu-direct-rdma-enabled", "2"},
                        {"USE_HOST_MOFED", "use-host-mofed", "no"},
                        {"FORCE_REINSTALL", "force-reinstall", "y"},
                        {"UNCORDON_ALWAYS", "uncordon-always", "enabled"}};
  for (const auto& c : cases) {
    const ParseResult r = parse_with_node({{c.var, c.value}});
    ASSERT_TRUE(r.exit_now) << c.var;
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.error, std::string("could not parse \"") + c.value +
                           "\" as bool value from environment variable \"" + c.var + "\" for flag " + c.flag +
                           ": strconv.ParseBool: parsing \"" + c.value + "\": invalid syntax");
    EXPECT_EQ(r.out_text, "");
  }
}

TEST(OptionsTest, DurationEnv) {
  struct Case {
    const char* value;
    Duration expected;
  };
  const Case cases[] = {{"300s", seconds(300)},       {"5m", minutes(5)},
                        {"1h30m", minutes(90)},       {"1.5h", minutes(90)},
                        {"0", Duration::zero()},      {"0s", Duration::zero()},
                        {"300", seconds(300)},        {"2.5", milliseconds(2500)},
                        {"250ms", milliseconds(250)}, {"1m0.5s", milliseconds(60500)}};
  for (const auto& c : cases) {
    for (const char* var : {"DRAIN_TIMEOUT_SECONDS", "OPERAND_WAIT_TIMEOUT", "GPU_CLIENT_EVICTION_TIMEOUT",
                            "MOFED_WAIT_TIMEOUT"}) {
      const ParseResult r = parse_with_node({{var, c.value}});
      ASSERT_FALSE(r.exit_now) << var << "=" << c.value << ": " << r.error;
      const auto& s = r.settings;
      const Duration got = std::string(var) == "DRAIN_TIMEOUT_SECONDS"  ? s.drain_timeout
                           : std::string(var) == "OPERAND_WAIT_TIMEOUT" ? s.operand_wait_timeout
                           : std::string(var) == "MOFED_WAIT_TIMEOUT"   ? s.mofed_wait_timeout
                                                                        : s.gpu_client_eviction_timeout;
      EXPECT_EQ(got, c.expected) << var << "=" << c.value;
    }
  }
  // Empty keeps the default.
  const ParseResult r = parse_with_node({{"OPERAND_WAIT_TIMEOUT", ""}, {"DRAIN_TIMEOUT_SECONDS", ""}});
  ASSERT_FALSE(r.exit_now);
  EXPECT_EQ(r.settings.operand_wait_timeout, minutes(5));
  EXPECT_EQ(r.settings.drain_timeout, Duration::zero());
}

TEST(OptionsTest, BadDurationEnvIsAnErrorNamingVariableAndFlag) {
  struct Case {
    const char* value;
    const char* why;
  };
  const Case cases[] = {{"abc", "time: invalid duration \"abc\""},
                        {"5x", "time: unknown unit \"x\" in duration \"5x\""},
                        {"5 m", "time: unknown unit \" m\" in duration \"5 m\""},
                        {"1h30", "time: missing unit in duration \"1h30\""},
                        {"-5s", "a negative duration is not allowed"},
                        {" 5s", "time: invalid duration \" 5s\""}};
  for (const auto& c : cases) {
    const ParseResult r = parse_with_node({{"DRAIN_TIMEOUT_SECONDS", c.value}});
    ASSERT_TRUE(r.exit_now) << c.value;
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.error,
              std::string("could not parse \"") + c.value +
                  "\" as duration value from environment variable \"DRAIN_TIMEOUT_SECONDS\" for flag "
                  "drain-timeout-seconds: " +
                  c.why);
  }
}

TEST(OptionsTest, GoDurationSyntax) {
  EXPECT_EQ(*parse_go_duration("1h2m3s4ms5us6ns"), hours(1) + minutes(2) + seconds(3) + milliseconds(4) +
                                                       std::chrono::microseconds(5) +
                                                       std::chrono::nanoseconds(6));
  EXPECT_EQ(*parse_go_duration("1.s"), seconds(1));
  EXPECT_EQ(*parse_go_duration(".5s"), milliseconds(500));
  EXPECT_EQ(*parse_go_duration("+5s"), seconds(5));
  EXPECT_EQ(*parse_go_duration("-1.5h"), -minutes(90));
  EXPECT_EQ(*parse_go_duration("-0"), Duration::zero());
  EXPECT_EQ(*parse_go_duration("3\xC2\xB5s"), std::chrono::microseconds(3));  // micro sign
  EXPECT_EQ(*parse_go_duration("3\xCE\xBCs"), std::chrono::microseconds(3));  // Greek mu
  EXPECT_EQ(parse_go_duration("300").error().message, "time: missing unit in duration \"300\"");
  EXPECT_EQ(parse_go_duration("").error().message, "time: invalid duration \"\"");
  EXPECT_EQ(parse_go_duration(".").error().message, "time: invalid duration \".\"");
  EXPECT_EQ(parse_go_duration("s").error().message, "time: invalid duration \"s\"");
  EXPECT_EQ(parse_go_duration("9999999999h").error().message, "time: invalid duration \"9999999999h\"");
  EXPECT_EQ(parse_go_duration("1d").error().message, "time: unknown unit \"d\" in duration \"1d\"");
  // Our bare-seconds extension.
  EXPECT_EQ(*parse_duration_or_seconds("300"), seconds(300));
  EXPECT_EQ(*parse_duration_or_seconds("0"), Duration::zero());
  EXPECT_EQ(*parse_duration_or_seconds("5m"), minutes(5));
  EXPECT_FALSE(parse_duration_or_seconds("3."));
  EXPECT_FALSE(parse_duration_or_seconds("1e3"));
}

TEST(OptionsTest, StringEnvSetButEmptyOverridesDefault) {
  const ParseResult r = parse_with_node({{"OPERATOR_NAMESPACE", ""},
                                         {"GPU_CLIENT_TAINT", "nvidia.com/gpu:NoSchedule"},
                                         {"DRIVER_CONFIG_DIGEST", ""}});
  ASSERT_FALSE(r.exit_now) << r.error;
  EXPECT_EQ(r.settings.operator_namespace, "");
  EXPECT_EQ(r.settings.driver_config_digest, "");
}

TEST(OptionsTest, MissingNodeNameIsRequiredFlagError) {
  const ParseResult r = parse({});
  ASSERT_TRUE(r.exit_now);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.error, "Required flag \"node-name\" not set");
  EXPECT_TRUE(contains(r.out_text, "GLOBAL OPTIONS:"));
  // It applies to every sub-command, and to none.
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"preflight_check"}, {}, {"help"}, {"bogus"}}) {
    const ParseResult p = parse({}, args);
    EXPECT_EQ(p.exit_code, 1);
    EXPECT_EQ(p.error, "Required flag \"node-name\" not set");
  }
  // Set but empty satisfies it (upstream: fails later at the API).
  const ParseResult empty = parse({{"NODE_NAME", ""}});
  ASSERT_FALSE(empty.exit_now);
  EXPECT_EQ(empty.settings.node_name, "");
  // So does the flag.
  const ParseResult flag = parse({}, {"--node-name", "n1", "preflight_check"});
  ASSERT_FALSE(flag.exit_now) << flag.error;
  EXPECT_EQ(flag.settings.node_name, "n1");
  EXPECT_EQ(flag.command, Command::kPreflightCheck);
}

TEST(OptionsTest, CustomLabelValueIsStrippedWithAWarning) {
  const ParseResult r = parse_with_node({{"NODE_LABEL_FOR_GPU_POD_EVICTION", "example.com/gpu-agent=on"}});
  ASSERT_FALSE(r.exit_now);
  EXPECT_EQ(r.settings.node_label_for_gpu_pod_eviction, "example.com/gpu-agent");
  ASSERT_EQ(r.warnings.size(), 1U);
  EXPECT_TRUE(contains(r.warnings[0], "NODE_LABEL_FOR_GPU_POD_EVICTION=\"example.com/gpu-agent=on\""));
  EXPECT_TRUE(contains(r.warnings[0], "\"example.com/gpu-agent\""));
  EXPECT_TRUE(contains(r.warnings[0], "\"on\""));
}

TEST(OptionsTest, InvalidValuesOfOurSettings) {
  struct Case {
    const char* var;
    const char* value;
    const char* fragment;
  };
  const Case cases[] = {
      {"GPU_CLIENT_TAINT", "nvidia.com/gpu",
       "invalid value \"nvidia.com/gpu\" from environment variable \"GPU_CLIENT_TAINT\" for flag "
       "gpu-client-taint: "
       "invalid taint \"nvidia.com/gpu\""},
      {"GPU_CLIENT_TAINT", "", "for flag gpu-client-taint: invalid taint \"\""},
      {"LOG_FORMAT", "xml",
       "from environment variable \"LOG_FORMAT\" for flag log-format: invalid log format"},
      {"LOG_LEVEL", "loud",
       "for flag log-level: invalid log level \"loud\" (want panic, fatal, error, warning, info, debug or "
       "trace)"},
      {"DRAIN_POD_SELECTOR_LABEL", "app in web",
       "for flag drain-pod-selector-label: invalid label selector \"app in web\""},
  };
  for (const auto& c : cases) {
    const ParseResult r = parse_with_node({{c.var, c.value}});
    ASSERT_TRUE(r.exit_now) << c.var;
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(contains(r.error, c.fragment)) << r.error;
  }
}

TEST(OptionsTest, FlagsOverrideEnvironment) {
  const ParseResult r = parse_with_node(
      {{"DRAIN_USE_FORCE", "false"}, {"OPERATOR_NAMESPACE", "env-ns"}, {"DRAIN_TIMEOUT_SECONDS", "10s"}},
      {"--drain-use-force", "--operator-namespace", "flag-ns", "--drain-timeout-seconds=2m",
       "--enable-auto-drain=false", "--log-format", "json", "--gpu-client-taint=a=b:NoExecute",
       "uninstall_driver"});
  ASSERT_FALSE(r.exit_now) << r.error;
  EXPECT_TRUE(r.settings.drain_use_force);
  EXPECT_EQ(r.settings.operator_namespace, "flag-ns");
  EXPECT_EQ(r.settings.drain_timeout, minutes(2));
  EXPECT_FALSE(r.settings.enable_auto_drain);
  EXPECT_EQ(r.log_format, LogFormat::kJson);
  EXPECT_EQ(r.settings.gpu_client_taint, "a=b:NoExecute");
  // The last occurrence wins, like Go's flag package.
  const ParseResult last =
      parse_with_node({}, {"--operator-namespace=a", "--operator-namespace=b", "preflight_check"});
  EXPECT_EQ(last.settings.operator_namespace, "b");
}

TEST(OptionsTest, BadFlagsAreUsageErrors) {
  ParseResult r = parse_with_node({}, {"--bogus", "uninstall_driver"});
  ASSERT_TRUE(r.exit_now);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.error, "flag provided but not defined: --bogus");
  EXPECT_TRUE(contains(r.out_text, "Incorrect Usage."));

  r = parse_with_node({}, {"--drain-use-force=maybe", "uninstall_driver"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.error,
            "could not parse \"maybe\" as bool value from command line for flag drain-use-force: "
            "strconv.ParseBool: parsing \"maybe\": invalid syntax");

  r = parse_with_node({}, {"--drain-timeout-seconds", "soon", "uninstall_driver"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.error, "time: invalid duration \"soon\"")) << r.error;

  r = parse_with_node({}, {"--drain-timeout-seconds"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.error.empty());

  // Global flags belong before the sub-command.
  r = parse_with_node({}, {"uninstall_driver", "--drain-use-force"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.error, "flag provided but not defined: --drain-use-force");
}

TEST(OptionsTest, SubCommandsHelpAndVersion) {
  EXPECT_EQ(parse_with_node({}, {"preflight_check"}).command, Command::kPreflightCheck);
  EXPECT_EQ(parse_with_node({}, {"uninstall_driver"}).command, Command::kUninstallDriver);

  for (const auto& args : std::vector<std::vector<std::string>>{{},
                                                                {"help"},
                                                                {"h"},
                                                                {"help", "uninstall_driver"},
                                                                {"-h"},
                                                                {"--help"},
                                                                {"uninstall_driver", "-h"}}) {
    const ParseResult r = parse_with_node({}, args);
    ASSERT_TRUE(r.exit_now);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.error, "");
    EXPECT_TRUE(contains(r.out_text, "uninstall_driver")) << r.out_text;
    EXPECT_TRUE(contains(r.out_text, "[$NODE_NAME]"));
  }
  // urfave/cli: an unknown command or help topic prints its own line (no log line) and exits 3.
  ParseResult r = parse_with_node({}, {"frobnicate"});
  EXPECT_TRUE(r.exit_now);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.err_text, "No help topic for 'frobnicate'\n");
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.out_text, "");
  r = parse_with_node({}, {"help", "frobnicate"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.err_text, "No help topic for 'frobnicate'\n");

  // Help and version come before the required-flag check.
  for (const char* v : {"-v", "--version"}) {
    r = parse({}, {v});
    ASSERT_TRUE(r.exit_now);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out_text, "driver-manager version v1.2.3 (commit abc1234)\n");
  }
  r = parse_options({"driver-manager", "--version"}, Env{}.lookup(), VersionInfo{"v1.2.3", ""});
  EXPECT_EQ(r.out_text, "driver-manager version v1.2.3\n");
  r = parse_options({"driver-manager", "--version"}, Env{}.lookup(),
                    VersionInfo{"0.13.0", "abc1234", "v0.12.0"});
  EXPECT_EQ(r.out_text,
            "driver-manager version 0.13.0 (commit abc1234), tracks k8s-driver-manager v0.12.0\n");
  r = parse({}, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out_text, "GLOBAL OPTIONS:"));
}

TEST(OptionsTest, EnvironmentErrorsComeFirst) {
  // urfave/cli applies the environment while building its flag set, before help or the required check.
  const ParseResult r = parse({{"DRAIN_USE_FORCE", "maybe"}}, {"--help"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.error, "DRAIN_USE_FORCE"));
}

TEST(OptionsTest, HelpListsEveryVariable) {
  const std::string h = help_text(kVersion);
  const std::vector<std::string> vars = environment_variables();
  for (const char* v : {"NODE_NAME",
                        "DRAIN_USE_FORCE",
                        "DRAIN_POD_SELECTOR_LABEL",
                        "DRAIN_TIMEOUT_SECONDS",
                        "DRAIN_DELETE_EMPTYDIR_DATA",
                        "ENABLE_AUTO_DRAIN",
                        "ENABLE_GPU_POD_EVICTION",
                        "OPERATOR_NAMESPACE",
                        "NODE_LABEL_FOR_GPU_POD_EVICTION",
                        "GPU_DIRECT_RDMA_ENABLED",
                        "USE_HOST_MOFED",
                        "KUBECONFIG",
                        "FORCE_REINSTALL",
                        "LOG_FORMAT",
                        "LOG_LEVEL",
                        "OPERAND_WAIT_TIMEOUT",
                        "GPU_CLIENT_EVICTION_TIMEOUT",
                        "GPU_CLIENT_TAINT",
                        "MOFED_WAIT_TIMEOUT",
                        "PRE_INSTALLED_SLEEP",
                        "UNCORDON_ALWAYS",
                        "DRIVER_MANAGER_SIM_ROOT",
                        "VFIO_MANAGE_PATH"}) {
    EXPECT_TRUE(contains(h, std::string("[$") + v + "]")) << v;
    EXPECT_NE(std::find(vars.begin(), vars.end(), v), vars.end()) << v;
  }
  // Every variable help lists is exported (tests clear them all), plus the one that is not a flag.
  for (const auto& v : vars) {
    if (v != "DRIVER_CONFIG_DIGEST") {
      EXPECT_TRUE(contains(h, "[$" + v + "]")) << v;
    }
  }
  EXPECT_NE(std::find(vars.begin(), vars.end(), "DRIVER_CONFIG_DIGEST"), vars.end());
  EXPECT_TRUE(contains(h, "v1.2.3"));
}

TEST(OptionsTest, HelpShowsTheDefaultsTheSettingsHold) {
  // The defaults are written once (manager::Settings, ParseResult); help derives its text from them.
  const std::string h = help_text(kVersion);
  const manager::Settings d;
  EXPECT_TRUE(contains(h, "(default: " + d.operator_namespace + ") [$OPERATOR_NAMESPACE]")) << h;
  EXPECT_TRUE(contains(h, "(default: " + d.gpu_client_taint + ") [$GPU_CLIENT_TAINT]")) << h;
  EXPECT_TRUE(contains(h, "(default: " + format_duration(d.operand_wait_timeout, DurationStyle::kGo) +
                              ") [$OPERAND_WAIT_TIMEOUT]"))
      << h;
  EXPECT_TRUE(contains(h, "(default: " + format_duration(d.pre_installed_sleep, DurationStyle::kGo) +
                              ") [$PRE_INSTALLED_SLEEP]"))
      << h;
  EXPECT_TRUE(contains(h, "(default: 0s) [$DRAIN_TIMEOUT_SECONDS]")) << h;
  EXPECT_TRUE(contains(h, "(default: true) [$ENABLE_AUTO_DRAIN]")) << h;
  EXPECT_TRUE(contains(h, "(default: false) [$DRAIN_USE_FORCE]")) << h;
  EXPECT_TRUE(contains(h, "(default: info) [$LOG_LEVEL]")) << h;
  EXPECT_TRUE(contains(h, "(default: text) [$LOG_FORMAT]")) << h;
  // Empty strings and the required flag show none, like urfave/cli.
  EXPECT_FALSE(contains(h, "(default: ) ")) << h;
  EXPECT_FALSE(contains(h, "(default: ) [$NODE_NAME]")) << h;

  // What a parse without any setting yields is exactly what help advertises.
  const ParseResult r = parse_with_node({});
  EXPECT_EQ(r.settings.operator_namespace, d.operator_namespace);
  EXPECT_EQ(r.settings.operand_wait_timeout, d.operand_wait_timeout);
  EXPECT_EQ(r.log_level, "info");
}

// Help shows a duration as Go prints it (common/duration_text), and that text parses back to it.
TEST(OptionsTest, GoDurationTextRoundTrips) {
  for (Duration d : {Duration(minutes(5)), Duration(seconds(61)), Duration(milliseconds(1234))}) {
    auto back = parse_go_duration(format_duration(d, DurationStyle::kGo));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, d);
  }
}

// Differential against the forms Go documents and accepts for time.ParseDuration: an optional sign, then
// decimal numbers with optional fractions, each with a unit (ns, us, µs, μs, ms, s, m, h); "0" alone needs
// no unit; the range is exactly int64 nanoseconds, down to -2^63.
TEST(OptionsTest, GoDurationFormsAsGoReadsThem) {
  using std::chrono::nanoseconds;
  const std::pair<const char*, int64_t> good[] = {
      {"0", 0},
      {"5s", 5'000'000'000},
      {"-5s", -5'000'000'000},
      {"+5s", 5'000'000'000},
      {"-0", 0},
      {"+0", 0},
      {"5.0s", 5'000'000'000},
      {"5.6s", 5'600'000'000},
      {"5.s", 5'000'000'000},
      {".5s", 500'000'000},
      {"1.004s", 1'004'000'000},
      {"100.00100s", 100'001'000'000},
      {"10ns", 10},
      {"11us", 11'000},
      {"12\u00b5s", 12'000},  // micro sign
      {"12\u03bcs", 12'000},  // Greek mu
      {"13ms", 13'000'000},
      {"15m", 900'000'000'000},
      {"16h", 57'600'000'000'000},
      {"3h30m", 12'600'000'000'000},
      {"10.5s4m", 250'500'000'000},
      {"-2m3.4s", -123'400'000'000},
      {"1h2m3s4ms5us6ns", 3'723'004'005'006},
      {"39h9m14.425s", 140'954'425'000'000},
      {"52763797000ns", 52'763'797'000},
      {"0.3333333333333333333h", 1'200'000'000'000},
      {"9223372036854775807ns", std::numeric_limits<int64_t>::max()},
      {"9223372036854775.807us", std::numeric_limits<int64_t>::max()},
      {"9223372036s854ms775us807ns", std::numeric_limits<int64_t>::max()},
      {"-9223372036854775808ns", std::numeric_limits<int64_t>::min()},
      {"-9223372036854775.808us", std::numeric_limits<int64_t>::min()},
      {"0.100000000000000000000h", 360'000'000'000},
  };
  for (const auto& [text, ns] : good) {
    const auto d = parse_go_duration(text);
    ASSERT_TRUE(d) << text << ": " << d.error().message;
    EXPECT_EQ(std::chrono::duration_cast<nanoseconds>(*d).count(), ns) << text;
  }
  for (const char* bad : {"", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "\x85\x85",
                          "9223372036854775808ns", "-9223372036854775809ns", "9223372036854ms775us808ns",
                          "9223372036854775808ns9223372036854775808ns", "-9223372036854775808ns1ns"}) {
    EXPECT_FALSE(parse_go_duration(bad)) << bad;
  }
}

TEST(OptionsTest, LogLevelIsParsedLikeLogrus) {
  for (const auto& [in, canonical] : std::vector<std::pair<std::string, std::string>>{{"WARN", "warning"},
                                                                                      {"Trace", "trace"},
                                                                                      {"panic", "panic"},
                                                                                      {"FATAL", "fatal"},
                                                                                      {"Info", "info"}}) {
    const ParseResult r = parse_with_node({{"LOG_LEVEL", in}});
    ASSERT_FALSE(r.exit_now) << in << ": " << r.error;
    EXPECT_EQ(r.log_level, canonical) << in;
  }
  const ParseResult flag = parse_with_node({}, {"--log-level=DEBUG", "uninstall_driver"});
  ASSERT_FALSE(flag.exit_now) << flag.error;
  EXPECT_EQ(flag.log_level, "debug");
}

TEST(OptionsTest, VfioManageBesideTheExecutableUnlessConfigured) {
  const std::string dir = std::filesystem::temp_directory_path() / "dm-vfio-beside-XXXXXX";
  std::string tmpl = dir;
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string bin = tmpl;
  const std::string self = bin + "/driver-manager";
  // Nothing beside it: PATH decides.
  EXPECT_EQ(default_vfio_manage(self), "vfio-manage");
  EXPECT_EQ(default_vfio_manage(""), "vfio-manage");
  // A file that is not executable does not count.
  { std::ofstream(bin + "/vfio-manage") << "#!/bin/sh\n"; }
  EXPECT_EQ(default_vfio_manage(self), "vfio-manage");
  std::filesystem::permissions(bin + "/vfio-manage", std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  EXPECT_EQ(default_vfio_manage(self), bin + "/vfio-manage");
  std::filesystem::remove_all(bin);

  // Only a configured path counts as given; an unset one leaves the choice to default_vfio_manage.
  EXPECT_FALSE(parse_with_node({}).vfio_manage_given);
  const ParseResult env = parse_with_node({{"VFIO_MANAGE_PATH", "/opt/vfio-manage"}});
  EXPECT_TRUE(env.vfio_manage_given);
  EXPECT_EQ(env.settings.vfio_manage, "/opt/vfio-manage");
  const ParseResult flag = parse_with_node({}, {"--vfio-manage", "/x/vfio-manage", "uninstall_driver"});
  EXPECT_TRUE(flag.vfio_manage_given);
  EXPECT_EQ(flag.settings.vfio_manage, "/x/vfio-manage");
}

TEST(OptionsTest, SelfExecutableIsThisTest) {
  EXPECT_TRUE(self_executable().ends_with("/options_test")) << self_executable();
}

}  // namespace
}  // namespace dm::cli

namespace dm::cli {
namespace {

TEST(OptionsTest, PlanTakesAnOutputFormatAndTheNode) {
  auto text = parse({{"NODE_NAME", "n1"}}, {"plan"});
  EXPECT_FALSE(text.exit_now);
  EXPECT_EQ(text.command, Command::kPlan);
  EXPECT_EQ(text.output, "text");
  for (const auto& args : std::vector<std::vector<std::string>>{{"plan", "-o", "json"},
                                                                {"plan", "--output", "json"},
                                                                {"plan", "--output=json"},
                                                                {"plan", "-o=json"}}) {
    auto r = parse({{"NODE_NAME", "n1"}}, args);
    EXPECT_FALSE(r.exit_now) << args.back();
    EXPECT_EQ(r.output, "json") << args.back();
  }
  auto node = parse({}, {"plan", "--node-name", "gpu-7", "-o", "json"});
  EXPECT_FALSE(node.exit_now) << node.error;
  EXPECT_EQ(node.settings.node_name, "gpu-7");

  auto bad = parse({{"NODE_NAME", "n1"}}, {"plan", "-o", "yaml"});
  EXPECT_TRUE(bad.exit_now);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.error, "invalid value \"yaml\" for flag -o/--output: text or json");
  auto unknown = parse({{"NODE_NAME", "n1"}}, {"plan", "--force"});
  EXPECT_EQ(unknown.error, "flag provided but not defined: --force");

  auto help = parse({{"NODE_NAME", "n1"}}, {"help", "plan"});
  EXPECT_TRUE(help.exit_now);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out_text.find("   plan "), std::string::npos);
}

}  // namespace
}  // namespace dm::cli

namespace dm::cli {
namespace {

TEST(OptionsTest, PlanForAWaveNeedsNoNodeName) {
  auto all = parse({}, {"plan", "--all-nodes"});
  ASSERT_FALSE(all.exit_now) << all.error;
  EXPECT_EQ(all.command, Command::kPlan);
  EXPECT_EQ(all.wave_selector, std::optional<std::string>("nvidia.com/gpu.deploy.driver=true"));
  auto sel = parse({}, {"plan", "--selector", "pool in (a,b)", "-o=json"});
  ASSERT_FALSE(sel.exit_now) << sel.error;
  EXPECT_EQ(sel.wave_selector, std::optional<std::string>("pool in (a,b)"));
  EXPECT_EQ(sel.output, "json");
  auto every = parse({}, {"plan", "--all-nodes", "--selector="});
  ASSERT_FALSE(every.exit_now) << every.error;
  EXPECT_EQ(every.wave_selector, std::optional<std::string>(""));
  auto every2 = parse({}, {"plan", "--selector", ""});
  ASSERT_FALSE(every2.exit_now) << every2.error;
  EXPECT_EQ(every2.wave_selector, std::optional<std::string>(""));
  // NODE_NAME in the environment (a pod's) does not turn a wave into one node.
  auto in_pod = parse({{"NODE_NAME", "n1"}}, {"plan", "--all-nodes"});
  EXPECT_TRUE(in_pod.wave_selector.has_value());
  EXPECT_FALSE(parse({{"NODE_NAME", "n1"}}, {"plan"}).wave_selector.has_value());

  auto both = parse({}, {"plan", "--all-nodes", "--node-name", "n1"});
  EXPECT_TRUE(both.exit_now);
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_TRUE(contains(both.error, "give one or the other")) << both.error;
  auto bad = parse({}, {"plan", "--selector", "a in (b"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.error, "invalid value \"a in (b\" for flag --selector")) << bad.error;
  auto none = parse({}, {"plan"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_EQ(none.error, "Required flag \"node-name\" not set");
}

TEST(OptionsTest, RecoverTakesItsNodeAndForce) {
  auto r = parse({}, {"recover", "--node-name=gpu-3", "--force"});
  ASSERT_FALSE(r.exit_now) << r.error;
  EXPECT_EQ(r.command, Command::kRecover);
  EXPECT_EQ(r.settings.node_name, "gpu-3");
  EXPECT_TRUE(r.force);
  auto unknown = parse({}, {"recover", "--node-name", "gpu-3", "--all-nodes"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.error, "flag provided but not defined: --all-nodes");
  auto help = parse({}, {"recover", "-h"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out_text, "--selector value"));
}

}  // namespace
}  // namespace dm::cli
