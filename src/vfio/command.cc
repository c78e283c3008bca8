#include "vfio/command.h"

#include <spdlog/spdlog.h>
#include <sys/utsname.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

#include "common/go_bool.h"
#include "common/log.h"
#include "host/host.h"
#include "vfio/pci.h"
#include "vfio/vfio.h"

namespace dm::vfio {
namespace {

constexpr std::string_view kNvSwitchEnv = "BIND_NVSWITCHES";

struct SubcommandOptions {
  bool all = false;
  std::string device_id;
  bool nvswitches = false;
  std::string host_root = "/";
};

CLI::App* add_subcommand(CLI::App& app, const std::string& name, const std::string& description,
                         const std::string& nvswitch_flag, SubcommandOptions& o) {
  CLI::App* sub = app.add_subcommand(name, description);
  sub->add_flag("-a,--all", o.all, "act on all NVIDIA GPUs (and NVSwitches with " + nvswitch_flag + ")");
  sub->add_option("-d,--device-id", o.device_id, "PCI address of one device, e.g. 0000:3b:00.0");
  sub->add_flag(nvswitch_flag, o.nvswitches,
                "include NVSwitch devices (env " + std::string(kNvSwitchEnv) + ")");
  return sub;
}

std::string kernel_release() {
  utsname u{};
  if (::uname(&u) != 0) return {};
  return u.release;
}

}  // namespace

int vfio_manage_main(int argc, const char* const* argv) {
  CLI::App app(
      "Bind NVIDIA GPUs (and optionally NVSwitches) to a vfio driver for passthrough, or unbind them.",
      "vfio-manage");
  SubcommandOptions bind_opts;
  SubcommandOptions unbind_opts;
  CLI::App* bind =
      add_subcommand(app, "bind", "Bind devices to their vfio driver (modules.alias, else vfio-pci)",
                     "--bind-nvswitches", bind_opts);
  bind->add_option("--host-root", bind_opts.host_root, "host root for `chroot <host-root> modprobe`")
      ->envname("HOST_ROOT")
      ->capture_default_str();
  CLI::App* unbind = add_subcommand(app, "unbind", "Unbind devices from whatever driver they are bound to",
                                    "--unbind-nvswitches", unbind_opts);
  app.require_subcommand(0, 1);
  app.footer(
      "Environment: HOST_ROOT, BIND_NVSWITCHES, DRIVER_MANAGER_SIM_ROOT (simulated host root for tests).");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    (void)app.exit(e);
    return 1;
  }

  setup_logging(LogFormat::kText, "info");
  const bool is_bind = bind->parsed();
  if (!is_bind && !unbind->parsed()) {
    std::cout << app.help();
    return 0;
  }
  SubcommandOptions& o = is_bind ? bind_opts : unbind_opts;
  const std::string nvswitch_flag = is_bind ? "--bind-nvswitches" : "--unbind-nvswitches";

  if (!o.all && o.device_id.empty()) {
    spdlog::critical("either --all or --device-id must be specified");
    return 1;
  }
  if (o.all && !o.device_id.empty()) {
    spdlog::critical("cannot specify both --all and --device-id");
    return 1;
  }
  if (!o.device_id.empty() && !valid_bdf(o.device_id)) {
    spdlog::critical(
        "invalid device ID \"{}\": expected a PCI address of the form dddd:bb:dd.f (e.g. 0000:3b:00.0)",
        o.device_id);
    return 1;
  }
  CLI::App* sub = is_bind ? bind : unbind;
  if (sub->count(nvswitch_flag) == 0) {
    // Go semantics for the environment (urfave/cli): set-but-empty is false, junk is an error.
    if (const char* env = std::getenv(std::string(kNvSwitchEnv).c_str())) {
      const std::string_view v = env;
      const auto b = v.empty() ? std::optional<bool>(false) : parse_go_bool(v);
      if (!b) {
        spdlog::critical(
            "could not parse \"{}\" as bool value from environment variable \"{}\" for flag {}: "
            "use true or false",
            v, kNvSwitchEnv, nvswitch_flag.substr(2));
        return 1;
      }
      o.nvswitches = *b;
    }
  }

  const char* sim_env = std::getenv("DRIVER_MANAGER_SIM_ROOT");
  const std::string sim_root = sim_env != nullptr ? sim_env : "";
  auto host = host::make_host(sim_root);
  VfioConfig config;
  config.host_root = o.host_root;
  config.include_nvswitches = o.nvswitches;
  config.simulated = !sim_root.empty();
  config.kernel_release = kernel_release();
  VfioManager manager(*host, *host, config);
  const std::optional<std::string> device =
      o.device_id.empty() ? std::nullopt : std::optional<std::string>(o.device_id);
  return manager.run(is_bind ? Action::kBind : Action::kUnbind, device);
}

}  // namespace dm::vfio
