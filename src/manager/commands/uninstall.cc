// The `uninstall_driver` sub-command: the SIGTERM handler, the settings check, the client, then the flow
// (manager/uninstall_flow).
#include "manager/commands/uninstall.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstdlib>

#include "manager/commands/command.h"
#include "manager/commands/own_pod.h"
#include "manager/commands/preflight.h"
#include "manager/commands/uninstall_flow.h"

namespace dm::manager {

namespace {

// The one piece of global state: written by the SIGTERM handler, read through a CancelToken.
std::atomic<bool> g_terminated{false};

extern "C" void on_sigterm(int /*sig*/) {
  g_terminated.store(true);
}

void install_sigterm_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

int run_uninstall_driver(const Settings& in_settings) {
  install_sigterm_handler();
  CancelToken cancel(&g_terminated);
  Settings settings = in_settings;
  // vfio-manage (a child process) finds the simulated host through the environment.
  if (!settings.sim_root.empty()) setenv("DRIVER_MANAGER_SIM_ROOT", settings.sim_root.c_str(), 1);
  fill_pod_identity_from_env(settings);
  if (!require_node_name(settings, "the name of this Kubernetes node")) return kExitFailed;
  const char* path_env = std::getenv("PATH");
  if (auto problems = settings_problems(settings, path_env != nullptr ? path_env : ""); !problems.empty()) {
    for (const auto& p : problems) spdlog::critical("{}", p);
    return kExitFailed;
  }
  SystemClock clock;
  // The connection has no token of its own: the run sends through views that name theirs (Uninstall). SIGTERM
  // stops the run's request in flight (and its retries) at once, so the cleanup starts within the grace
  // period even while the API server is away; the cleanup then writes with a token of its own.
  auto connection = connect(settings, restart_tolerant_options(clock));
  if (!connection) return kExitFailed;
  auto host = host::make_host(settings.sim_root);
  Uninstall flow(settings, *connection->client, *host, clock, cancel);
  const int exit_code = flow.run(connection->config);
  flow.finish(exit_code);
  return exit_code;
}

}  // namespace dm::manager
