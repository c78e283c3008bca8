#include "manager/commands/command.h"

#include <spdlog/spdlog.h>

namespace dm::manager {

kube::ClientOptions restart_tolerant_options(const Clock& clock) {
  kube::ClientOptions options;
  options.clock = &clock;
  return options;
}

std::optional<Connection> connect(const Settings& settings, const kube::ClientOptions& options) {
  auto config = kube::load_config(settings.kubeconfig);
  if (!config) {
    spdlog::critical("cannot load the Kubernetes client configuration: {}", config.error().message);
    return std::nullopt;
  }
  auto client = kube::Client::create(*config, options);
  if (!client) {
    spdlog::critical("cannot create the Kubernetes client for {}: {}", config->source,
                     client.error().message);
    return std::nullopt;
  }
  return Connection{std::move(*config), std::move(*client)};
}

bool require_node_name(const Settings& settings, std::string_view what) {
  if (!settings.node_name.empty()) return true;
  spdlog::critical("NODE_NAME (--node-name) is empty: set it to {}", what);
  return false;
}

SkipDecision read_skip_decision(const Settings& settings, const host::Host& host) {
  if (auto decided = skip_from_settings(settings)) return *decided;
  return skip_from_driver_state(settings, host.read_driver_state());
}

}  // namespace dm::manager
