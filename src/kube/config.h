// Where the API server is and how to authenticate: from a kubeconfig file or from inside a pod.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace dm::kube {

// Whether an exec credential plugin may talk to a person. A pod has no terminal: kIfAvailable runs the
// plugin without one, kAlways is refused when the kubeconfig is loaded.
enum class InteractiveMode { kNever, kIfAvailable, kAlways };

// users[].user.exec of a kubeconfig: a program that prints an ExecCredential (kube/exec_credential.h).
struct ExecConfig {
  std::string command{};  // PATH searched; a relative path with a slash is resolved against the kubeconfig
  std::vector<std::string> args{};
  std::vector<std::pair<std::string, std::string>> env{};  // added to (or replacing in) the program's own
  std::string api_version{};                               // client.authentication.k8s.io/v1 or /v1beta1
  InteractiveMode interactive_mode = InteractiveMode::kIfAvailable;
  bool provide_cluster_info = false;
  std::string install_hint{};    // shown when the command cannot be started
  std::string cluster_config{};  // JSON of the cluster's client.authentication.k8s.io/exec extension, or ""
};

struct Config {
  std::string server;  // https://host:port
  std::string ca_file;
  std::string ca_data;  // PEM (already base64-decoded)
  std::string client_cert_file;
  std::string client_cert_data;  // PEM
  std::string client_key_file;
  std::string client_key_data;  // PEM
  std::string token;            // never logged; read from token_file at load when that is set
  std::string token_file;       // rotated by the kubelet: the client re-reads it (see token_source.h)
  std::string
      tls_server_name;  // the name the server's certificate must be valid for (and SNI); "" = URL host
  bool insecure_skip_tls_verify = false;  // never together with a CA (refused at load, as kubectl does)
  std::optional<ExecConfig> exec;         // credentials come from this plugin (kube/exec_source.h)
  std::string ns = "default";             // context namespace, or the pod's namespace in-cluster
  std::string source;  // "kubeconfig <path> (context <name>)" or "in-cluster", for messages
};

// Loads `path` (context = current-context unless `context` is given). Errors name the file and field.
Result<Config> load_kubeconfig(const std::string& path, const std::string& context = {});

// Service-account token, CA and namespace under `sa_dir` (default
// /var/run/secrets/kubernetes.io/serviceaccount) and KUBERNETES_SERVICE_HOST/PORT.
Result<Config> in_cluster_config(const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// kubeconfig_path non-empty: load_kubeconfig; empty: in_cluster_config.
Result<Config> load_config(const std::string& kubeconfig_path);

}  // namespace dm::kube
