#include "cli/options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "common/go_bool.h"
#include "manager/rules/pod_rules.h"
#include "manager/rules/taints.h"

namespace dm::cli {
namespace {

std::string quote(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

enum class Kind { kString, kBool, kDuration };

// One global option: its flag, its environment variable, its type and where it goes in the result.
// Applied in table order, like urfave/cli applies its flags (the first bad environment value wins).
struct Flag {
  std::string name;  // without "--"
  std::string env;   // "" = no environment variable
  Kind kind;
  std::string usage;
  // The value held in a result, as help shows it: help shows a default-constructed result's, so every
  // default is written once, where ParseResult / manager::Settings declare it.
  std::function<std::string(const ParseResult& r)> shown;
  // Stores a string value (kString) or the parsed value (converted by the caller) into `out`.
  std::function<Status(ParseResult& out, const std::string& value)> set_string;
  std::function<void(ParseResult& out, bool value)> set_bool;
  std::function<void(ParseResult& out, Duration value)> set_duration;
  bool bare_seconds = false;  // duration also accepts a bare number of seconds (beyond upstream)
};

using manager::Settings;

// Each kind of flag is built from a pointer to its Settings field: the value shown in help is that field's
// default, and a kString `check` may validate or rewrite the value before it is stored.
Flag str_flag(std::string name, std::string env, std::string usage, std::string Settings::*field,
              std::function<Status(ParseResult&, const std::string&)> check = {}) {
  Flag f{std::move(name), std::move(env), Kind::kString, std::move(usage), {}, {}, {}, {}, false};
  f.shown = [field](const ParseResult& r) { return r.settings.*field; };
  f.set_string = [field, check = std::move(check)](ParseResult& r, const std::string& v) -> Status {
    if (check) return check(r, v);
    r.settings.*field = v;
    return {};
  };
  return f;
}

Flag bool_flag(std::string name, std::string env, std::string usage, bool Settings::*field) {
  Flag f{std::move(name), std::move(env), Kind::kBool, std::move(usage), {}, {}, {}, {}, false};
  f.shown = [field](const ParseResult& r) { return std::string(r.settings.*field ? "true" : "false"); };
  f.set_bool = [field](ParseResult& r, bool v) { r.settings.*field = v; };
  return f;
}

Flag duration_flag(std::string name, std::string env, std::string usage, Duration Settings::*field,
                   bool bare_seconds = true) {
  Flag f{std::move(name), std::move(env), Kind::kDuration, std::move(usage), {}, {}, {}, {}, bare_seconds};
  f.shown = [field](const ParseResult& r) { return go_duration_string(r.settings.*field); };
  f.set_duration = [field](ParseResult& r, Duration v) { r.settings.*field = v; };
  return f;
}

std::vector<Flag> flags() {
  std::vector<Flag> f;
  // Upstream's flags, in upstream's order.
  f.push_back(
      str_flag("node-name", "NODE_NAME", "the name of the node to manage (required)", &Settings::node_name));
  f.push_back(bool_flag("drain-use-force", "DRAIN_USE_FORCE",
                        "allow evicting pods that declare no controller (drain --force)",
                        &Settings::drain_use_force));
  f.push_back(str_flag("drain-pod-selector-label", "DRAIN_POD_SELECTOR_LABEL",
                       "label selector of the pods the full-node drain fallback evicts",
                       &Settings::drain_pod_selector_label,
                       [](ParseResult& r, const std::string& v) -> Status {
                         auto sel = manager::LabelSelector::parse(v);
                         if (!sel) return sel.error();
                         r.settings.drain_pod_selector_label = v;
                         return {};
                       }));
  f.push_back(
      duration_flag("drain-timeout-seconds", "DRAIN_TIMEOUT_SECONDS",
                    "deadline of GPU pod eviction and node drain (Go duration, or seconds; 0 = no limit)",
                    &Settings::drain_timeout));
  f.push_back(bool_flag("drain-delete-emptydir-data", "DRAIN_DELETE_EMPTYDIR_DATA",
                        "allow evicting pods with emptyDir volumes (their data is lost)",
                        &Settings::drain_delete_emptydir_data));
  f.push_back(bool_flag("enable-auto-drain", "ENABLE_AUTO_DRAIN",
                        "allow draining the whole node as a fallback", &Settings::enable_auto_drain));
  f.push_back(bool_flag("enable-gpu-pod-eviction", "ENABLE_GPU_POD_EVICTION",
                        "cordon the node and evict GPU pods", &Settings::enable_gpu_pod_eviction));
  f.push_back(str_flag("operator-namespace", "OPERATOR_NAMESPACE",
                       "namespace of the GPU Operator's operand pods", &Settings::operator_namespace));
  f.push_back(str_flag(
      "node-label-for-gpu-pod-eviction", "NODE_LABEL_FOR_GPU_POD_EVICTION",
      "extra node label key toggled like an operand label (DaemonSets selecting it are waited for)",
      &Settings::node_label_for_gpu_pod_eviction, [](ParseResult& r, const std::string& v) -> Status {
        const auto eq = v.find('=');
        if (eq != std::string::npos) {
          // The shell version took "key=value"; only the key is meaningful.
          r.warnings.push_back(
              fmt::format("NODE_LABEL_FOR_GPU_POD_EVICTION={} holds a value; only the label key {} is used, "
                          "the value \"{}\" "
                          "is ignored",
                          quote(v), quote(v.substr(0, eq)), v.substr(eq + 1)));
        }
        r.settings.node_label_for_gpu_pod_eviction = v.substr(0, eq);
        return {};
      }));
  f.push_back(bool_flag("gpu-direct-rdma-enabled", "GPU_DIRECT_RDMA_ENABLED",
                        "wait for the MOFED driver when Mellanox devices are present",
                        &Settings::gpu_direct_rdma_enabled));
  f.push_back(bool_flag("use-host-mofed", "USE_HOST_MOFED",
                        "MOFED is installed on the host (mlx5_core loaded)", &Settings::use_host_mofed));
  f.push_back(str_flag("kubeconfig", "KUBECONFIG",
                       "path to a kubeconfig file (empty: in-cluster configuration)", &Settings::kubeconfig));
  f.push_back(
      bool_flag("force-reinstall", "FORCE_REINSTALL",
                "always reinstall the driver, even if the loaded one matches the desired configuration",
                &Settings::force_reinstall));
  // Beyond upstream.
  Flag log_format{
      "log-format", "LOG_FORMAT", Kind::kString, "log format: text (logrus style) or json", {}, {},
      {},           {},           false};
  log_format.shown = [](const ParseResult& r) {
    return std::string(r.log_format == LogFormat::kJson ? "json" : "text");
  };
  log_format.set_string = [](ParseResult& r, const std::string& v) -> Status {
    auto fmt = parse_log_format(v);
    if (!fmt) return fmt.error();
    r.log_format = *fmt;
    return {};
  };
  f.push_back(std::move(log_format));
  Flag log_level{"log-level",
                 "LOG_LEVEL",
                 Kind::kString,
                 "log level, as logrus names them: panic, fatal, error, warning (warn), info, debug or trace",
                 {},
                 {},
                 {},
                 {},
                 false};
  log_level.shown = [](const ParseResult& r) { return r.log_level; };
  log_level.set_string = [](ParseResult& r, const std::string& v) -> Status {
    auto level = parse_log_level(v);
    if (!level) return level.error();
    r.log_level = *level;
    return {};
  };
  f.push_back(std::move(log_level));
  f.push_back(duration_flag("operand-wait-timeout", "OPERAND_WAIT_TIMEOUT",
                            "one deadline for all operand pods to go away after their labels were paused",
                            &Settings::operand_wait_timeout));
  f.push_back(duration_flag("gpu-client-eviction-timeout", "GPU_CLIENT_EVICTION_TIMEOUT",
                            "deadline for evicting annotated GPU client pods and waiting for them",
                            &Settings::gpu_client_eviction_timeout));
  f.push_back(str_flag("gpu-client-taint", "GPU_CLIENT_TAINT",
                       "taint (key[=value]:effect) keeping evicted GPU client pods off the node",
                       &Settings::gpu_client_taint, [](ParseResult& r, const std::string& v) -> Status {
                         auto t = manager::parse_taint(v);
                         if (!t) return t.error();
                         r.settings.gpu_client_taint = v;
                         return {};
                       }));
  f.push_back(duration_flag("mofed-wait-timeout", "MOFED_WAIT_TIMEOUT",
                            "deadline for the MOFED driver to become ready (0 = no limit)",
                            &Settings::mofed_wait_timeout));
  f.push_back(duration_flag("pre-installed-sleep", "PRE_INSTALLED_SLEEP",
                            "wait before failing when a host driver is pre-installed (upstream: 60s)",
                            &Settings::pre_installed_sleep));
  f.push_back(bool_flag("uncordon-always", "UNCORDON_ALWAYS",
                        "uncordon the node even if this program did not cordon it (upstream behaviour)",
                        &Settings::legacy_uncordon));
  f.push_back(str_flag("sim-root", "DRIVER_MANAGER_SIM_ROOT",
                       "act on a simulated host rooted at this directory (tests and demos)",
                       &Settings::sim_root));
  f.push_back(
      str_flag("vfio-manage", "VFIO_MANAGE_PATH",
               "the vfio-manage binary to run (default: the one beside this executable, else from PATH)",
               &Settings::vfio_manage, [](ParseResult& r, const std::string& v) -> Status {
                 r.settings.vfio_manage = v;
                 r.vfio_manage_given = true;
                 return {};
               }));
  return f;
}

// Parses a value of `f` and stores it; `source` names where it came from, for the error.
Status apply(const Flag& f, ParseResult& out, const std::string& value, const std::string& source) {
  auto failure = [&](std::string_view type, const std::string& why) {
    return Error(fmt::format("could not parse {} as {} value from {} for flag {}: {}", quote(value), type,
                             source, f.name, why));
  };
  switch (f.kind) {
    case Kind::kString: {
      Status s = f.set_string(out, value);
      if (!s)
        return Error(fmt::format("invalid value {} from {} for flag {}: {}", quote(value), source, f.name,
                                 s.error().message));
      return {};
    }
    case Kind::kBool: {
      // urfave/cli: a set-but-empty variable is false, even for flags defaulting to true.
      if (value.empty()) {
        f.set_bool(out, false);
        return {};
      }
      auto b = parse_bool_value(value);
      if (!b) return failure("bool", b.error().message);
      f.set_bool(out, *b);
      return {};
    }
    case Kind::kDuration: {
      auto d = f.bare_seconds ? parse_duration_or_seconds(value) : parse_go_duration(value);
      if (!d) return failure("duration", d.error().message);
      if (*d < Duration::zero()) return failure("duration", "a negative duration is not allowed");
      f.set_duration(out, *d);
      return {};
    }
  }
  return {};
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<std::string> environment_variables() {
  std::vector<std::string> names;
  for (const auto& f : flags()) {
    if (!f.env.empty()) names.push_back(f.env);
  }
  names.emplace_back("DRIVER_CONFIG_DIGEST");
  return names;
}

std::string go_duration_string(Duration d) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  if (ns == 0) return "0s";
  const bool neg = ns < 0;
  // The magnitude in unsigned arithmetic: -ns overflows for the most negative duration.
  const auto u = neg ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  // The digits of v / 10^prec with the fraction's trailing zeros (and a bare ".") dropped.
  const auto frac = [](uint64_t v, int prec) {
    std::string digits;
    bool print = false;
    for (int i = 0; i < prec; ++i) {
      const auto digit = v % 10;
      print = print || digit != 0;
      if (print) digits.insert(digits.begin(), static_cast<char>('0' + digit));
      v /= 10;
    }
    return std::make_pair(v, digits.empty() ? std::string() : "." + digits);
  };
  std::string out;
  if (u < 1000000000ULL) {
    // Below one second: a single unit (ns, µs or ms) with a fraction.
    int prec = 0;
    std::string unit = "ns";
    if (u >= 1000000ULL) {
      prec = 6;
      unit = "ms";
    } else if (u >= 1000ULL) {
      prec = 3;
      unit = "\u00b5s";
    }
    auto [whole, f] = frac(u, prec);
    out = std::to_string(whole) + f + unit;
  } else {
    auto [secs, f] = frac(u, 9);
    out = std::to_string(secs % 60) + f + "s";
    const uint64_t mins = secs / 60;
    if (mins > 0) {
      out = std::to_string(mins % 60) + "m" + out;
      if (mins / 60 > 0) out = std::to_string(mins / 60) + "h" + out;
    }
  }
  return neg ? "-" + out : out;
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

Result<bool> parse_bool_value(std::string_view s) {
  auto b = parse_go_bool(s);
  if (!b) return Error(fmt::format("strconv.ParseBool: parsing {}: invalid syntax", quote(s)));
  return *b;
}

Result<Duration> parse_go_duration(std::string_view orig) {
  // Mirrors Go's time.ParseDuration, including its error texts.
  auto invalid = [&] { return Error("time: invalid duration " + quote(orig)); };
  std::string_view s = orig;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return Duration::zero();
  if (s.empty()) return invalid();
  // As in Go, the running values may reach 2^63 (the magnitude of the most negative duration); only a
  // positive total is limited to 2^63-1, at the end.
  constexpr uint64_t kMax = uint64_t{1} << 63;
  uint64_t total = 0;
  while (!s.empty()) {
    if (!(s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))) return invalid();
    // Integer part.
    uint64_t v = 0;
    size_t i = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (v > kMax / 10) return invalid();
      v = v * 10 + static_cast<uint64_t>(s[i] - '0');
      if (v > kMax) return invalid();
    }
    const bool pre = i > 0;
    s.remove_prefix(i);
    // Fraction part.
    uint64_t f = 0;
    double scale = 1;
    bool post = false;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      size_t j = 0;
      bool overflow = false;
      for (; j < s.size() && s[j] >= '0' && s[j] <= '9'; ++j) {
        if (overflow) continue;
        if (f > kMax / 10) {
          overflow = true;  // like Go: further digits are dropped
          continue;
        }
        const uint64_t nf = f * 10 + static_cast<uint64_t>(s[j] - '0');
        if (nf > kMax) {
          overflow = true;
          continue;
        }
        f = nf;
        scale *= 10;
      }
      post = j > 0;
      s.remove_prefix(j);
    }
    if (!pre && !post) return invalid();
    // Unit.
    size_t u = 0;
    for (; u < s.size() && s[u] != '.' && !(s[u] >= '0' && s[u] <= '9'); ++u) {
    }
    if (u == 0) return Error("time: missing unit in duration " + quote(orig));
    const std::string_view unit = s.substr(0, u);
    s.remove_prefix(u);
    uint64_t mult = 0;
    if (unit == "ns") {
      mult = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") {  // us, U+00B5 s, U+03BC s
      mult = 1000;
    } else if (unit == "ms") {
      mult = 1000000;
    } else if (unit == "s") {
      mult = 1000000000ULL;
    } else if (unit == "m") {
      mult = 60ULL * 1000000000ULL;
    } else if (unit == "h") {
      mult = 3600ULL * 1000000000ULL;
    } else {
      return Error("time: unknown unit " + quote(unit) + " in duration " + quote(orig));
    }
    if (v > kMax / mult) return invalid();
    v *= mult;
    if (f > 0) {
      v += static_cast<uint64_t>(static_cast<double>(f) * (static_cast<double>(mult) / scale));
      if (v > kMax) return invalid();
    }
    if (v > kMax - total) return invalid();  // (no wrap-around: 2^63 + 2^63 is 0 in 64 bits)
    total += v;
  }
  if (!neg && total == kMax) return invalid();
  // -2^63 is representable; its magnitude is not.
  const int64_t ns = total == kMax ? std::numeric_limits<int64_t>::min()
                                   : (neg ? -static_cast<int64_t>(total) : static_cast<int64_t>(total));
  return std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(ns));
}

Result<Duration> parse_duration_or_seconds(std::string_view s) {
  // Beyond upstream: "300" or "2.5" means seconds (the variable is called DRAIN_TIMEOUT_SECONDS).
  const auto dot = s.find('.');
  const bool bare = dot == std::string_view::npos
                        ? is_digits(s)
                        : is_digits(s.substr(0, dot)) && is_digits(s.substr(dot + 1));
  if (bare) {
    auto d = parse_go_duration(std::string(s) + "s");
    if (d) return d;
  }
  return parse_go_duration(s);
}

std::string help_text(const VersionInfo& version) {
  std::string out;
  out += "NAME:\n   driver-manager - prepare a node for a (re)install of the containerized NVIDIA driver\n\n";
  out += "USAGE:\n   driver-manager [global options] command [command options]\n\n";
  out += "VERSION:\n   " + version.version + "\n\n";
  out += "COMMANDS:\n";
  out +=
      "   uninstall_driver  take the GPU clients off the node, unload the NVIDIA driver and restore the "
      "clients\n";
  out += "   preflight_check   check that driver-manager can start (configuration and Kubernetes access)\n";
  out +=
      "   recover           undo what a killed run left on the node (its taint, cordon, paused labels, "
      "lease);\n"
      "                     options: --node-name value, --force (even while a run's lease is live)\n";
  out +=
      "   plan              print what uninstall_driver would do on the node now, changing nothing;\n"
      "                     options: --node-name value, -o, --output text|json (default: text)\n";
  out += "   help, h           Shows a list of commands or help for one command\n\n";
  out += "GLOBAL OPTIONS:\n";
  const ParseResult defaults;
  for (const auto& f : flags()) {
    std::string left = "--" + f.name + (f.kind == Kind::kBool ? "" : " value");
    std::string right = f.usage;
    // Like urfave/cli: a required flag and an empty string show no default.
    if (const std::string def = f.shown(defaults);
        !def.empty() && f.name != "node-name" && f.name != "vfio-manage") {
      right += " (default: " + def + ")";
    }
    if (!f.env.empty()) right += " [$" + f.env + "]";
    out += fmt::format("   {:<40} {}\n", left, right);
  }
  out += fmt::format("   {:<40} {}\n", "--help, -h", "show help");
  out += fmt::format("   {:<40} {}\n", "--version, -v", "print the version");
  return out;
}

ParseResult parse_options(const std::vector<std::string>& args, const EnvLookup& env,
                          const VersionInfo& version) {
  ParseResult r;
  auto exit_with = [&](int code, std::string out_text, std::string error) {
    r.exit_now = true;
    r.exit_code = code;
    r.out_text = std::move(out_text);
    r.error = std::move(error);
    return r;
  };
  // urfave/cli prints this itself (no log line) and exits 3.
  auto unknown = [&](const std::string& what) {
    ParseResult u = exit_with(kExitUnknownCommand, "", "");
    u.err_text = "No help topic for '" + what + "'\n";
    return u;
  };
  const std::vector<Flag> table = flags();

  // 1. The environment, with urfave/cli's rules (see options.h for why this is not CLI11's envname()).
  for (const auto& f : table) {
    if (f.env.empty()) continue;
    const auto v = env(f.env);
    if (!v) continue;
    if (f.kind == Kind::kDuration && v->empty()) continue;  // empty duration keeps the default
    Status s = apply(f, r, *v, "environment variable " + quote(f.env));
    if (!s) return exit_with(1, "", s.error().message);
  }
  if (const auto digest = env("DRIVER_CONFIG_DIGEST")) r.settings.driver_config_digest = *digest;

  // 2. argv: CLI11 parses global flags up to the first positional (Go flag semantics, prefix_command);
  // everything from there on is the sub-command and its arguments.
  CLI::App app;
  app.set_help_flag();
  app.prefix_command();
  std::vector<std::pair<const Flag*, std::string>> values(table.size());
  std::vector<CLI::Option*> options(table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    values[i].first = &table[i];
    if (table[i].kind == Kind::kBool) {
      options[i] = app.add_flag("--" + table[i].name, values[i].second);
    } else {
      options[i] = app.add_option("--" + table[i].name, values[i].second);
    }
    options[i]->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  bool help = false;
  bool show_version = false;
  app.add_flag("-h,--help", help);
  app.add_flag("-v,--version", show_version);
  std::vector<std::string> argv_rev;
  for (size_t i = args.size(); i > 1; --i) argv_rev.push_back(args[i - 1]);
  try {
    app.parse(argv_rev);
  } catch (const CLI::ParseError& e) {
    return exit_with(1, "Incorrect Usage. " + std::string(e.what()) + "\n\n" + help_text(version), e.what());
  }
  const std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest[0].size() > 1 && rest[0][0] == '-' && rest[0] != "--") {
    const std::string msg = "flag provided but not defined: " + rest[0];
    return exit_with(1, "Incorrect Usage. " + msg + "\n\n" + help_text(version), msg);
  }
  for (size_t i = 0; i < table.size(); ++i) {
    if (options[i]->count() == 0) continue;
    Status s = apply(table[i], r, values[i].second, "command line");
    if (!s) {
      const std::string msg = s.error().message;
      return exit_with(1, "Incorrect Usage. " + msg + "\n\n" + help_text(version), msg);
    }
  }

  // 3. urfave/cli's order: help and version flags, then required flags, then the sub-command.
  if (help) return exit_with(0, help_text(version), "");
  if (show_version) {
    std::string v = "driver-manager version " + version.version;
    if (!version.commit.empty()) v += ", commit: " + version.commit;
    return exit_with(0, v + "\n", "");
  }
  size_t cmd_at = 0;
  if (!rest.empty() && rest[0] == "--") cmd_at = 1;
  bool node_name_given = options[0]->count() > 0 || env("NODE_NAME").has_value();
  // recover runs from an operator's machine too: its node may follow the command (--node-name N, --force).
  if (rest.size() > cmd_at && rest[cmd_at] == "recover") {
    for (size_t i = cmd_at + 1; i < rest.size(); ++i) {
      const std::string& a = rest[i];
      if (a == "-h" || a == "--help") return exit_with(0, help_text(version), "");
      if (a == "--force") {
        r.force = true;
      } else if (a == "--node-name" && i + 1 < rest.size()) {
        r.settings.node_name = rest[++i];
        node_name_given = true;
      } else if (a.rfind("--node-name=", 0) == 0) {
        r.settings.node_name = a.substr(std::string("--node-name=").size());
        node_name_given = true;
      } else {
        const std::string msg = "flag provided but not defined: " + a;
        return exit_with(1, "Incorrect Usage. " + msg + "\n\n" + help_text(version), msg);
      }
    }
  }
  // plan takes the node the same way, and its output format.
  if (rest.size() > cmd_at && rest[cmd_at] == "plan") {
    for (size_t i = cmd_at + 1; i < rest.size(); ++i) {
      const std::string& a = rest[i];
      std::string value;
      if (a == "-h" || a == "--help") return exit_with(0, help_text(version), "");
      if ((a == "-o" || a == "--output") && i + 1 < rest.size()) {
        value = rest[++i];
      } else if (a.rfind("--output=", 0) == 0 || a.rfind("-o=", 0) == 0) {
        value = a.substr(a.find('=') + 1);
      } else if (a == "--node-name" && i + 1 < rest.size()) {
        r.settings.node_name = rest[++i];
        node_name_given = true;
        continue;
      } else if (a.rfind("--node-name=", 0) == 0) {
        r.settings.node_name = a.substr(std::string("--node-name=").size());
        node_name_given = true;
        continue;
      } else {
        const std::string msg = "flag provided but not defined: " + a;
        return exit_with(1, "Incorrect Usage. " + msg + "\n\n" + help_text(version), msg);
      }
      if (value != "text" && value != "json") {
        const std::string msg = "invalid value \"" + value + "\" for flag -o/--output: text or json";
        return exit_with(1, "Incorrect Usage. " + msg + "\n\n" + help_text(version), msg);
      }
      r.output = value;
    }
  }
  if (!node_name_given) return exit_with(1, help_text(version), "Required flag \"node-name\" not set");

  if (rest.size() <= cmd_at) return exit_with(0, help_text(version), "");
  const std::string& cmd = rest[cmd_at];
  if (cmd == "uninstall_driver" || cmd == "preflight_check") {
    // The sub-commands have no flags of their own (urfave/cli: -h shows help, anything else is unknown).
    for (size_t i = cmd_at + 1; i < rest.size(); ++i) {
      const std::string& a = rest[i];
      if (a == "--") break;
      if (a == "-h" || a == "--help") return exit_with(0, help_text(version), "");
      if (a.size() > 1 && a[0] == '-') {
        const std::string msg = "flag provided but not defined: " + a;
        return exit_with(1, "Incorrect Usage. " + msg + "\n\n" + help_text(version), msg);
      }
    }
  }
  if (cmd == "uninstall_driver") {
    r.command = Command::kUninstallDriver;
  } else if (cmd == "preflight_check") {
    r.command = Command::kPreflightCheck;
  } else if (cmd == "recover") {
    r.command = Command::kRecover;
  } else if (cmd == "plan") {
    r.command = Command::kPlan;
  } else if (cmd == "help" || cmd == "h") {
    if (rest.size() <= cmd_at + 1) return exit_with(0, help_text(version), "");
    const std::string& topic = rest[cmd_at + 1];
    if (topic == "uninstall_driver" || topic == "preflight_check" || topic == "recover" || topic == "plan" ||
        topic == "help" || topic == "h") {
      return exit_with(0, help_text(version), "");
    }
    return unknown(topic);
  } else {
    return unknown(cmd);
  }
  return r;
}

}  // namespace dm::cli
