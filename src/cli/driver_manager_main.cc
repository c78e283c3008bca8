// driver-manager: the GPU Operator's driver-manager init container.
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/options.h"
#include "common/log.h"
#include "common/termination_message.h"
#include "kube/client.h"
#include "kube/config.h"
#include "manager/commands/recover.h"
#include "manager/commands/uninstall.h"
#include "manager/plan/command.h"
#include "manager/plan/wave.h"

#ifndef DM_VERSION
#define DM_VERSION "dev"
#endif
#ifndef DM_GIT_COMMIT
#define DM_GIT_COMMIT ""
#endif
#ifndef DM_UPSTREAM_VERSION
#define DM_UPSTREAM_VERSION ""
#endif

namespace {

int preflight_check(const dm::manager::Settings& settings) {
  spdlog::info("Performing preflight checks");
  auto config = dm::kube::load_config(settings.kubeconfig);
  if (!config) {
    spdlog::critical("{}", config.error().wrap("cannot load the Kubernetes client configuration").message);
    return 1;
  }
  // Building the client validates the credentials' format; it sends no request.
  auto client = dm::kube::Client::create(*config);
  if (!client) {
    spdlog::critical("{}", client.error().wrap("cannot create the Kubernetes client").message);
    return 1;
  }
  spdlog::info("Preflight checks completed");
  return 0;
}

int run(const std::vector<std::string>& args) {
  dm::cli::ParseResult parsed = dm::cli::parse_options(
      args, dm::cli::process_env(), dm::cli::VersionInfo{DM_VERSION, DM_GIT_COMMIT, DM_UPSTREAM_VERSION});
  if (parsed.exit_now) {
    if (!parsed.out_text.empty()) {
      std::fputs(parsed.out_text.c_str(), stdout);
      std::fflush(stdout);
    }
    if (!parsed.err_text.empty()) std::fputs(parsed.err_text.c_str(), stderr);
    if (!parsed.error.empty()) {
      dm::setup_logging(parsed.log_format, "info");
      spdlog::critical("{}", parsed.error);
    }
    return parsed.exit_code;
  }
  dm::setup_logging(parsed.log_format, parsed.log_level);
  for (const auto& w : parsed.warnings) spdlog::warn("{}", w);
  if (!parsed.vfio_manage_given) {
    parsed.settings.vfio_manage = dm::cli::default_vfio_manage(dm::cli::self_executable());
  }
  spdlog::debug("vfio-manage: {}", parsed.settings.vfio_manage);

  switch (parsed.command) {
    case dm::cli::Command::kPreflightCheck:
      return preflight_check(parsed.settings);
    case dm::cli::Command::kUninstallDriver:
      return dm::manager::run_uninstall_driver(parsed.settings);
    case dm::cli::Command::kRecover:
      return dm::manager::run_recover(parsed.settings, parsed.force ? dm::manager::LiveLease::kOverride
                                                                    : dm::manager::LiveLease::kRefuse);
    case dm::cli::Command::kPlan:
      if (parsed.wave_selector) {
        return dm::manager::run_plan_wave(parsed.settings, dm::manager::WaveSelection{*parsed.wave_selector},
                                          parsed.output);
      }
      return dm::manager::run_plan(parsed.settings, parsed.output);
    case dm::cli::Command::kNone:
      break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // One malloc arena for every thread (glibc would make up to 8 per core, each holding freed memory of its
  // own): the threads mostly wait on the network, so they do not contend for it (docs/benchmarks.md,
  // Memory). MALLOC_ARENA_MAX in the environment still wins.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 1);
  const int code = run(std::vector<std::string>(argv, argv + argc));
  // Every way to fail ends here: the last fatal line is the reason, and the kubelet shows it as the
  // container's termination message.
  if (code != 0) {
    std::string reason = dm::last_fatal_message();
    if (reason.empty()) reason = "driver-manager exited with status " + std::to_string(code);
    dm::write_termination_message(dm::termination_message_path(std::getenv("TERMINATION_MESSAGE_PATH")),
                                  reason);
  }
  return code;
}
