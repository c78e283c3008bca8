// driver-manager's command line and environment, with urfave/cli v2 semantics.
//
// Why the environment layer is hand-written: CLI11's envname() ignores variables that are set but empty,
// while urfave/cli treats an empty bool as false and an empty string as an override, and CLI11's bool and
// duration syntaxes differ from Go's ParseBool / time.ParseDuration. So env values are parsed here with
// Go's rules, and CLI11 parses only argv (flags as strings, converted with the same rules).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/go_values.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/result.h"
#include "manager/rules/settings.h"

namespace dm::cli {

enum class Command {
  kNone,             // no sub-command: help, exit 0
  kUninstallDriver,  // uninstall_driver
  kPreflightCheck,   // preflight_check
  kRecover,          // recover: undo what a killed run left on the node
  kPlan,             // plan: what uninstall_driver would do on the node now, changing nothing
};

// What the caller does with a parse: run `command` with `settings`, or print and exit.
struct ParseResult {
  Command command = Command::kNone;
  manager::Settings settings;
  LogFormat log_format = LogFormat::kText;  // --log-format / LOG_FORMAT
  std::string log_level = "info";           // --log-level / LOG_LEVEL (canonical logrus name)
  bool vfio_manage_given = false;     // --vfio-manage / VFIO_MANAGE_PATH was set (see default_vfio_manage)
  std::vector<std::string> warnings;  // to log once logging is set up
  bool force = false;                 // recover --force: a live lease does not stop it
  std::string output = "text";        // plan -o/--output: text (a table) or json
  // plan --all-nodes / --selector: the label selector of a wave's nodes ("": every node); unset: one node.
  std::optional<std::string> wave_selector;

  // Print out_text to stdout, err_text to stderr, error (if any) as a fatal log line, then exit exit_code.
  bool exit_now = false;
  int exit_code = 0;
  std::string out_text;  // help / version text (stdout)
  std::string err_text;  // printed as is (urfave/cli's own messages, e.g. "No help topic for 'x'")
  std::string error;     // e.g. `Required flag "node-name" not set` (logged at fatal level)
};

// Exit code of an unknown sub-command or help topic (urfave/cli's).
inline constexpr int kExitUnknownCommand = 3;

// Every environment variable driver-manager reads (the flags' and DRIVER_CONFIG_DIGEST).
std::vector<std::string> environment_variables();

// Looks up an environment variable; nullopt = unset (set-but-empty is "").
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
// The process environment.
EnvLookup process_env();

// Version shown by --version: "driver-manager version <version>[, commit: <commit>]".
struct VersionInfo {
  std::string version;
  std::string commit;      // "" = not shown
  std::string upstream{};  // the k8s-driver-manager release this one tracks, e.g. v0.12.0; "" = not shown
};

// Parses argv (args[0] = program name) and the environment. Never exits or prints.
ParseResult parse_options(const std::vector<std::string>& args, const EnvLookup& env,
                          const VersionInfo& version);

// The vfio-manage to run when neither --vfio-manage nor VFIO_MANAGE_PATH names one: the executable
// vfio-manage beside `self_exe` (the image installs both in /usr/bin, a build tree puts both in bin/), else
// "vfio-manage" (looked up in PATH).
std::string default_vfio_manage(const std::string& self_exe);
// This program's own executable (/proc/self/exe), or "" when it cannot be read.
std::string self_executable();

// The help text (urfave/cli layout: NAME, USAGE, VERSION, COMMANDS, GLOBAL OPTIONS).
std::string help_text(const VersionInfo& version);

}  // namespace dm::cli
