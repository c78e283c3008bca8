// Which HTTPS connections go through a proxy: HTTPS_PROXY / NO_PROXY as client-go reads them (the upper-case
// name wins over the lower-case one). Only http:// proxies are spoken to (HTTP CONNECT); loopback addresses
// and "localhost" always go direct. See README.md (configuration).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace dm::kube {

struct ProxyEnv {
  std::string https_proxy;  // "http://host:port", "host:port" or "" for none
  std::string no_proxy;     // comma-separated: "*", host names, .domains (or *.domains), IPs, CIDRs, each
                            // optionally :port
};

// HTTPS_PROXY or https_proxy, NO_PROXY or no_proxy from the process environment.
ProxyEnv proxy_env_from_environment();

struct ProxyEndpoint {
  std::string host;  // name or IP literal (no brackets)
  std::string port;
};

// The proxy to reach host:port through, or nullopt for a direct connection. A proxy setting that cannot be
// used (not http://, credentials, no host) is an error rather than a silent direct connection.
Result<std::optional<ProxyEndpoint>> proxy_for(const ProxyEnv& env, std::string_view host,
                                               std::string_view port);

}  // namespace dm::kube
