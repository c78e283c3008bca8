// Where the API server is and how to authenticate: from a kubeconfig file or from inside a pod.
#pragma once

#include <string>

#include "common/result.h"

namespace dm::kube {

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
