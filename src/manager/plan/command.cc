// The `plan` sub-command for one node: the settings checked as uninstall_driver checks them, the reads, the
// report, printed as text or JSON.
#include "manager/plan/command.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>

#include "host/host.h"
#include "manager/commands/command.h"
#include "manager/commands/preflight.h"
#include "manager/plan/build.h"
#include "manager/plan/read.h"
#include "manager/plan/render.h"

namespace dm::manager {

int run_plan(const Settings& in_settings, const std::string& output) {
  Settings settings = in_settings;
  fill_pod_identity_from_env(settings);
  if (!require_node_name(settings, "the name of a Kubernetes node")) return 1;
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "";
  // vfio-manage only runs on the node: its absence here (say, on an operator's laptop) is a note, not an
  // error; every other bad setting is refused as uninstall_driver refuses it.
  Settings checked = settings;
  const bool vfio_found = !resolve_executable(settings.vfio_manage, path).empty();
  if (!vfio_found) checked.vfio_manage = "/proc/self/exe";
  if (auto problems = settings_problems(checked, path); !problems.empty()) {
    for (const auto& pr : problems) spdlog::critical("{}", pr);
    return 1;
  }
  auto connection = connect(settings, kube::ClientOptions());
  if (!connection) return 1;
  auto host = host::make_host(settings.sim_root);
  auto inputs = read_plan_inputs(settings, *connection->client, *host);
  if (!inputs) {
    spdlog::critical("plan failed: {} (with {})", inputs.error().message, connection->config.source);
    return 1;
  }
  Plan plan = build_plan(settings, *inputs);
  if (!vfio_found) {
    plan.notes.push_back("VFIO_MANAGE_PATH=\"" + settings.vfio_manage +
                         "\": no such executable here; a run on the node refuses to start without it");
  }
  const std::string text = output == "json" ? plan_to_json(plan).dump(2) + "\n" : render_plan_text(plan);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace dm::manager
