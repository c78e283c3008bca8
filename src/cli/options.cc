// parse_options: the environment (urfave/cli's rules, cli/flags), then the global flags on the command
// line (CLI11), then the sub-command and its own options (cli/subcommands), in urfave/cli's order.
#include "cli/options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

#include "cli/flags.h"
#include "cli/subcommands.h"

namespace dm::cli {
namespace {

ParseResult exit_with(ParseResult r, int code, std::string out_text, std::string error) {
  r.exit_now = true;
  r.exit_code = code;
  r.out_text = std::move(out_text);
  r.error = std::move(error);
  return r;
}

ParseResult usage_error(ParseResult r, const std::string& message, const VersionInfo& version) {
  return exit_with(std::move(r), 1, "Incorrect Usage. " + message + "\n\n" + help_text(version), message);
}

// urfave/cli prints this itself (no log line) and exits 3.
ParseResult unknown_topic(ParseResult r, const std::string& what) {
  r = exit_with(std::move(r), kExitUnknownCommand, "", "");
  r.err_text = "No help topic for '" + what + "'\n";
  return r;
}

// 1. The environment, with urfave/cli's rules (see options.h for why this is not CLI11's envname()).
Status apply_environment(const EnvLookup& env, ParseResult& r) {
  for (const auto& f : global_flags()) {
    if (f.env.empty()) continue;
    const auto v = env(f.env);
    if (!v) continue;
    if (f.kind == Kind::kDuration && v->empty()) continue;  // empty duration keeps the default
    if (Status s = apply_flag(f, r, *v, "environment variable " + quote(f.env)); !s) return s;
  }
  if (const auto digest = env("DRIVER_CONFIG_DIGEST")) r.settings.driver_config_digest = *digest;
  return {};
}

struct GlobalArgs {
  std::vector<std::string> rest;  // the sub-command and what follows it
  bool help = false;
  bool version = false;
  bool node_name_given = false;
  std::string error;  // a usage error
};

// 2. argv: CLI11 parses global flags up to the first positional (Go flag semantics, prefix_command);
// everything from there on is the sub-command and its arguments.
GlobalArgs parse_global_args(const std::vector<std::string>& args, ParseResult& r) {
  GlobalArgs g;
  const auto& table = global_flags();
  CLI::App app;
  app.set_help_flag();
  app.prefix_command();
  std::vector<std::string> values(table.size());
  std::vector<CLI::Option*> options(table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    options[i] = table[i].kind == Kind::kBool ? app.add_flag("--" + table[i].name, values[i])
                                              : app.add_option("--" + table[i].name, values[i]);
    options[i]->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  app.add_flag("-h,--help", g.help);
  app.add_flag("-v,--version", g.version);
  std::vector<std::string> argv_rev;
  for (size_t i = args.size(); i > 1; --i) argv_rev.push_back(args[i - 1]);
  try {
    app.parse(argv_rev);
  } catch (const CLI::ParseError& e) {
    g.error = e.what();
    return g;
  }
  g.rest = app.remaining();
  if (!g.rest.empty() && g.rest[0].size() > 1 && g.rest[0][0] == '-' && g.rest[0] != "--") {
    g.error = "flag provided but not defined: " + g.rest[0];
    return g;
  }
  for (size_t i = 0; i < table.size(); ++i) {
    if (options[i]->count() == 0) continue;
    if (Status s = apply_flag(table[i], r, values[i], "command line"); !s) {
      g.error = s.error().message;
      return g;
    }
    if (table[i].name == "node-name") g.node_name_given = true;
  }
  return g;
}

// uninstall_driver and preflight_check have no options of their own (urfave/cli: -h shows help, any other
// flag is unknown). Returns the usage error, "" when none.
std::string check_no_options(const std::vector<std::string>& args, bool& help) {
  for (const auto& a : args) {
    if (a == "--") break;
    if (a == "-h" || a == "--help") {
      help = true;
      return "";
    }
    if (a.size() > 1 && a[0] == '-') return "flag provided but not defined: " + a;
  }
  return "";
}

constexpr std::pair<std::string_view, Command> kCommands[] = {{"uninstall_driver", Command::kUninstallDriver},
                                                              {"preflight_check", Command::kPreflightCheck},
                                                              {"recover", Command::kRecover},
                                                              {"plan", Command::kPlan}};

std::optional<Command> command_named(std::string_view name) {
  for (const auto& [n, c] : kCommands) {
    if (n == name) return c;
  }
  return std::nullopt;
}

// `help [topic]`: help for a known topic, urfave/cli's error for an unknown one.
ParseResult help_topic(ParseResult r, const std::vector<std::string>& args, const VersionInfo& version) {
  if (args.empty() || command_named(args[0]) || args[0] == "help" || args[0] == "h")
    return exit_with(std::move(r), 0, help_text(version), "");
  return unknown_topic(std::move(r), args[0]);
}

// 3. The sub-command and its options.
ParseResult with_command(ParseResult r, const std::string& cmd, const std::vector<std::string>& args,
                         bool node_name_given, const VersionInfo& version) {
  const auto command = command_named(cmd);
  // recover and plan take the node among their own options, so those come first.
  if (command == Command::kRecover || command == Command::kPlan) {
    const SubcommandParse sub = parse_subcommand(cmd, args, r);
    if (!sub.error.empty()) return usage_error(std::move(r), sub.error, version);
    if (sub.help) return exit_with(std::move(r), 0, help_text(version), "");
    node_name_given = node_name_given || sub.node_name_given;
  }
  // A wave of nodes needs no node name.
  if (!node_name_given && !r.wave_selector)
    return exit_with(std::move(r), 1, help_text(version), "Required flag \"node-name\" not set");
  if (command == Command::kUninstallDriver || command == Command::kPreflightCheck) {
    bool help = false;
    if (const std::string e = check_no_options(args, help); !e.empty())
      return usage_error(std::move(r), e, version);
    if (help) return exit_with(std::move(r), 0, help_text(version), "");
  }
  if (cmd == "help" || cmd == "h") return help_topic(std::move(r), args, version);
  if (!command) return unknown_topic(std::move(r), cmd);
  r.command = *command;
  return r;
}

}  // namespace

std::vector<std::string> environment_variables() {
  std::vector<std::string> names;
  for (const auto& f : global_flags()) {
    if (!f.env.empty()) names.push_back(f.env);
  }
  names.emplace_back("DRIVER_CONFIG_DIGEST");
  return names;
}

std::string self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

std::string default_vfio_manage(const std::string& self_exe) {
  std::string fallback = manager::Settings{}.vfio_manage;
  if (self_exe.empty()) return fallback;
  const auto beside = std::filesystem::path(self_exe).parent_path() / fallback;
  if (::access(beside.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(beside)) return beside.string();
  return fallback;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());  // NOLINT(concurrency-mt-unsafe): read before threads start
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

ParseResult parse_options(const std::vector<std::string>& args, const EnvLookup& env,
                          const VersionInfo& version) {
  ParseResult r;
  if (Status s = apply_environment(env, r); !s) return exit_with(std::move(r), 1, "", s.error().message);
  GlobalArgs g = parse_global_args(args, r);
  if (!g.error.empty()) return usage_error(std::move(r), g.error, version);
  // urfave/cli's order: help and version flags, then required flags, then the sub-command.
  if (g.help) return exit_with(std::move(r), 0, help_text(version), "");
  if (g.version) {
    std::string v = "driver-manager version " + version.version;
    if (!version.commit.empty()) v += " (commit " + version.commit + ")";
    if (!version.upstream.empty()) v += ", tracks k8s-driver-manager " + version.upstream;
    return exit_with(std::move(r), 0, v + "\n", "");
  }
  const size_t cmd_at = !g.rest.empty() && g.rest[0] == "--" ? 1 : 0;
  const bool node_name_given = g.node_name_given || env("NODE_NAME").has_value();
  if (g.rest.size() <= cmd_at) {
    if (!node_name_given)
      return exit_with(std::move(r), 1, help_text(version), "Required flag \"node-name\" not set");
    return exit_with(std::move(r), 0, help_text(version), "");
  }
  const std::vector<std::string> sub_args(g.rest.begin() + static_cast<std::ptrdiff_t>(cmd_at) + 1,
                                          g.rest.end());
  return with_command(std::move(r), g.rest[cmd_at], sub_args, node_name_given, version);
}

}  // namespace dm::cli
