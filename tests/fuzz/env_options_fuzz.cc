// driver-manager's environment (cli/options): "NAME=value" lines, then the command line parsed with them
// as uninstall_driver, plan or recover would (a line that is just one of those names picks it; without one,
// uninstall_driver); the proxy variables as the API client reads them. One command per input: building the
// command line's parser is most of what an input costs, and the environment reads the same for all three.
#include "cli/options.h"
#include "fuzz_support.h"
#include "kube/proxy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> env;
  std::string command = "uninstall_driver";
  for (const auto line : dm::fuzz::split(dm::fuzz::text(data, size), "\n")) {
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos) {
      env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    } else if (line == "plan" || line == "recover" || line == "uninstall_driver") {
      command = line;
    }
  }
  const dm::cli::EnvLookup lookup = [&](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional(it->second);
  };
  const dm::cli::VersionInfo version{"0.0.0", ""};
  const auto r = dm::cli::parse_options({"driver-manager", command}, lookup, version);
  if (r.exit_now && r.exit_code == 0 && !r.error.empty()) dm::fuzz::fail("an error with exit code 0");
  const dm::kube::ProxyEnv proxy{lookup("HTTPS_PROXY").value_or(""), lookup("NO_PROXY").value_or("")};
  for (const char* host : {"10.96.0.1", "kubernetes.default.svc", "::1", "api.example.com"})
    (void)dm::kube::proxy_for(proxy, host, "443");
  return 0;
}
