#include "manager/rules/skip.h"

#include "host/host.h"

namespace dm::manager {

std::optional<SkipDecision> skip_from_settings(const Settings& settings) {
  SkipDecision d;
  if (settings.force_reinstall) {
    d.log_line = "Force reinstall is enabled, proceeding with driver uninstall";
    d.summary = "FORCE_REINSTALL is set";
    return d;
  }
  d.checked = true;
  if (!settings.driver_config_digest || settings.driver_config_digest->empty()) {
    d.log_line = "DRIVER_CONFIG_DIGEST env var not set, assuming config changed";
    d.warning = true;
    d.summary = "DRIVER_CONFIG_DIGEST is not set";
    return d;
  }
  return std::nullopt;
}

SkipDecision skip_from_driver_state(const Settings& settings,
                                    const Result<std::optional<std::string>>& state) {
  SkipDecision d;
  d.checked = true;
  if (!state) {
    d.log_line = "Failed to read driver config state file: " + state.error().message;
    d.warning = true;
    d.summary = "the driver state file cannot be read: " + state.error().message;
    return d;
  }
  if (!state->has_value()) {
    d.log_line = "No previous driver configuration found";
    d.summary = "no driver state file " + std::string(host::kDriverStateFile);
    return d;
  }
  d.skip = host::driver_config_matches(settings.driver_config_digest.value_or(""), **state);
  d.summary = d.skip ? "the loaded driver's configuration digest equals DRIVER_CONFIG_DIGEST"
                     : "the loaded driver's configuration digest differs from DRIVER_CONFIG_DIGEST";
  return d;
}

bool refuse_for_unloadable_driver(const Status& can_unload, const SkipDecision& skip) {
  return !can_unload && !skip.skip;
}

}  // namespace dm::manager
