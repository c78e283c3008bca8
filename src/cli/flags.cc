#include "cli/flags.h"

#include <fmt/format.h>

#include <utility>

#include "cli/go_values.h"
#include "common/duration_text.h"
#include "manager/rules/label_selector.h"
#include "manager/rules/taints.h"

namespace dm::cli {

std::string quote(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

namespace {

using manager::Settings;

// Each kind of flag is built from a pointer to its Settings field: the value shown in help is that field's
// default, and a kString `check` may validate or rewrite the value before it is stored.
Flag str_flag(std::string name, std::string env, std::string usage, std::string Settings::*field,
              std::function<Status(ParseResult&, const std::string&)> check = {}) {
  return {.name = std::move(name),
          .env = std::move(env),
          .kind = Kind::kString,
          .usage = std::move(usage),
          .shown = [field](const ParseResult& r) { return r.settings.*field; },
          .set_string = [field, check = std::move(check)](ParseResult& r, const std::string& v) -> Status {
            if (check) return check(r, v);
            r.settings.*field = v;
            return {};
          }};
}

Flag bool_flag(std::string name, std::string env, std::string usage, bool Settings::*field) {
  return {
      .name = std::move(name),
      .env = std::move(env),
      .kind = Kind::kBool,
      .usage = std::move(usage),
      .shown = [field](const ParseResult& r) { return std::string(r.settings.*field ? "true" : "false"); },
      .set_bool = [field](ParseResult& r, bool v) { r.settings.*field = v; }};
}

// Every duration flag also takes a bare number of seconds.
Flag duration_flag(std::string name, std::string env, std::string usage, Duration Settings::*field) {
  return {
      .name = std::move(name),
      .env = std::move(env),
      .kind = Kind::kDuration,
      .usage = std::move(usage),
      .shown =
          [field](const ParseResult& r) { return format_duration(r.settings.*field, DurationStyle::kGo); },
      .set_duration = [field](ParseResult& r, Duration v) { r.settings.*field = v; },
      .bare_seconds = true};
}

void add_upstream_flags(std::vector<Flag>& f) {
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
}

void add_log_flags(std::vector<Flag>& f) {
  f.push_back({.name = "log-format",
               .env = "LOG_FORMAT",
               .kind = Kind::kString,
               .usage = "log format: text (logrus style) or json",
               .shown =
                   [](const ParseResult& r) {
                     return std::string(r.log_format == LogFormat::kJson ? "json" : "text");
                   },
               .set_string = [](ParseResult& r, const std::string& v) -> Status {
                 auto fmt = parse_log_format(v);
                 if (!fmt) return fmt.error();
                 r.log_format = *fmt;
                 return {};
               }});
  f.push_back(
      {.name = "log-level",
       .env = "LOG_LEVEL",
       .kind = Kind::kString,
       .usage = "log level, as logrus names them: panic, fatal, error, warning (warn), info, debug or trace",
       .shown = [](const ParseResult& r) { return r.log_level; },
       .set_string = [](ParseResult& r, const std::string& v) -> Status {
         auto level = parse_log_level(v);
         if (!level) return level.error();
         r.log_level = *level;
         return {};
       }});
}

void add_flags_beyond_upstream(std::vector<Flag>& f) {
  add_log_flags(f);
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
}

}  // namespace

const std::vector<Flag>& global_flags() {
  static const std::vector<Flag> table = [] {
    std::vector<Flag> f;
    add_upstream_flags(f);
    add_flags_beyond_upstream(f);
    return f;
  }();
  return table;
}

Status apply_flag(const Flag& f, ParseResult& out, const std::string& value, const std::string& source) {
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

}  // namespace dm::cli
