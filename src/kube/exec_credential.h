// The ExecCredential of client.authentication.k8s.io (v1 and v1beta1): what driver-manager hands an exec
// credential plugin in KUBERNETES_EXEC_INFO and what it reads back from the plugin's standard output.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "kube/config.h"

namespace dm::kube {

struct ExecCredential {
  std::string token;            // status.token; "" when the plugin gave a client certificate instead
  std::string client_cert_pem;  // status.clientCertificateData
  std::string client_key_pem;   // status.clientKeyData
  // status.expirationTimestamp; none: valid until the API server rejects it.
  std::optional<std::chrono::system_clock::time_point> expires;
};

// Parses a plugin's standard output. It must be one ExecCredential of `api_version` with a status that
// holds a token, or a client certificate and its key (both), and an RFC 3339 expirationTimestamp if any.
// The error says what is wrong, without the credential's text.
Result<ExecCredential> parse_exec_credential(std::string_view text, const std::string& api_version);

// The value of KUBERNETES_EXEC_INFO for `config`'s plugin: an ExecCredential of its apiVersion with
// spec.interactive false and, when the plugin asks for it (provideClusterInfo), spec.cluster: the server,
// its TLS settings, the CA (base64, read from ca_file when it is not inline) and the cluster's exec
// extension.
Result<std::string> exec_info(const Config& config);

// An RFC 3339 timestamp (2026-05-01T12:00:00Z, with optional fractional seconds and a numeric offset).
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text);

}  // namespace dm::kube
