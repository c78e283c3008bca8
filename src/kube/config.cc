#include "kube/config.h"

#include <yaml-cpp/binary.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

namespace dm::kube {
namespace {

namespace fs = std::filesystem;

Result<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Error("cannot read " + path + ": " + std::strerror(errno));
  return ss.str();
}

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// Paths in a kubeconfig are relative to the file's own directory (as kubectl resolves them).
std::string resolve(const fs::path& base_dir, const std::string& p) {
  if (p.empty() || fs::path(p).is_absolute()) return p;
  return (base_dir / p).lexically_normal().string();
}

// The string value of `node[key]`, or "" when absent; throws YAML::Exception when it is not a scalar.
std::string str(const YAML::Node& node, const char* key) {
  const YAML::Node v = node[key];
  if (!v.IsDefined() || v.IsNull()) return {};
  return v.as<std::string>();
}

// Finds `name` in a kubeconfig list (clusters/users/contexts) and returns its `inner` map.
std::optional<YAML::Node> find_named(const YAML::Node& root, const char* list, const char* inner,
                                     const std::string& name) {
  const YAML::Node items = root[list];
  if (!items.IsDefined() || !items.IsSequence()) return std::nullopt;
  for (const auto& item : items) {
    if (!item.IsMap()) continue;
    if (str(item, "name") == name) {
      const YAML::Node v = item[inner];
      return v.IsDefined() && !v.IsNull() ? v : YAML::Node(YAML::NodeType::Map);
    }
  }
  return std::nullopt;
}

Result<std::string> decode_pem(const std::string& b64, const std::string& what) {
  // Strip whitespace: multi-line base64 is legal in YAML block scalars.
  std::string clean;
  for (char c : b64) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') clean.push_back(c);
  }
  // Only the base64 alphabet reaches yaml-cpp's decoder: it looks each character up in a table indexed by
  // the (signed) char, so a byte above 0x7f is read from outside the table.
  const bool alphabet = std::all_of(clean.begin(), clean.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/' || c == '=';
  });
  if (!alphabet) return Error(what + " is not valid base64");
  const auto bytes = YAML::DecodeBase64(clean);
  if (bytes.empty() && !clean.empty()) return Error(what + " is not valid base64");
  return std::string(bytes.begin(), bytes.end());
}

Status check_readable(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return Error(what + " " + path + " cannot be read: " + std::strerror(errno));
  return {};
}

// A PEM given inline (KEY-data, base64) or as a file (KEY, relative to the kubeconfig's folder), whichever is
// set.
Status pem_data_or_file(const YAML::Node& node, const std::string& key, const std::string& owner,
                        const fs::path& dir, std::string& data, std::string& file) {
  if (const std::string d = str(node, (key + "-data").c_str()); !d.empty()) {
    auto pem = decode_pem(d, key + "-data of " + owner);
    if (!pem) return pem.error();
    data = std::move(*pem);
  } else if (const std::string f = str(node, key.c_str()); !f.empty()) {
    file = resolve(dir, f);
    return check_readable(file, key + " of " + owner);
  }
  return {};
}

Status read_cluster(const YAML::Node& cluster, const std::string& cluster_what, const fs::path& dir,
                    Config& cfg) {
  cfg.server = str(cluster, "server");
  if (cfg.server.empty()) return Error(cluster_what + " has no server");
  while (cfg.server.size() > 1 && cfg.server.back() == '/') cfg.server.pop_back();
  if (const YAML::Node v = cluster["insecure-skip-tls-verify"]; v.IsDefined() && !v.IsNull()) {
    cfg.insecure_skip_tls_verify = v.as<bool>();
  }
  cfg.tls_server_name = str(cluster, "tls-server-name");
  if (!str(cluster, "proxy-url").empty()) {
    return Error(cluster_what +
                 " sets proxy-url, which driver-manager does not support; remove it and set HTTPS_PROXY (and "
                 "NO_PROXY) in the environment instead");
  }
  if (auto st =
          pem_data_or_file(cluster, "certificate-authority", cluster_what, dir, cfg.ca_data, cfg.ca_file);
      !st)
    return st;
  if (cfg.insecure_skip_tls_verify && (!cfg.ca_data.empty() || !cfg.ca_file.empty())) {
    return Error(cluster_what +
                 " sets both insecure-skip-tls-verify and a certificate authority; with a CA, the server's "
                 "certificate is checked: remove insecure-skip-tls-verify");
  }
  return {};
}

// A YAML tree as JSON: plain scalars that read as JSON literals (true, 3, null) keep their type, everything
// else is a string (the shape kubectl gives a cluster extension).
nlohmann::json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      auto obj = nlohmann::json::object();
      for (const auto& kv : node) obj[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return obj;
    }
    case YAML::NodeType::Sequence: {
      auto arr = nlohmann::json::array();
      for (const auto& v : node) arr.push_back(yaml_to_json(v));
      return arr;
    }
    case YAML::NodeType::Scalar: {
      const std::string& v = node.Scalar();
      if (node.Tag() == "?") {
        auto literal = nlohmann::json::parse(v, nullptr, /*allow_exceptions=*/false);
        if (!literal.is_discarded() && !literal.is_object() && !literal.is_array() && !literal.is_string())
          return literal;
      }
      return v;
    }
    default:
      return nullptr;
  }
}

// The config of the cluster's client.authentication.k8s.io/exec extension, as JSON ("" when absent).
std::string exec_cluster_config(const YAML::Node& cluster) {
  const YAML::Node exts = cluster["extensions"];
  if (!exts.IsDefined() || !exts.IsSequence()) return {};
  for (const auto& e : exts) {
    if (e.IsMap() && str(e, "name") == "client.authentication.k8s.io/exec") {
      const YAML::Node v = e["extension"];
      return v.IsDefined() && !v.IsNull() ? yaml_to_json(v).dump() : std::string();
    }
  }
  return {};
}

Result<InteractiveMode> interactive_mode(const YAML::Node& exec, const std::string& what,
                                         const std::string& api_version) {
  const std::string mode = str(exec, "interactiveMode");
  if (mode.empty()) {
    if (api_version == "client.authentication.k8s.io/v1")
      return Error(what +
                   " has no interactiveMode, which client.authentication.k8s.io/v1 requires (Never or "
                   "IfAvailable)");
    return InteractiveMode::kIfAvailable;
  }
  if (mode == "Never") return InteractiveMode::kNever;
  if (mode == "IfAvailable") return InteractiveMode::kIfAvailable;
  if (mode == "Always")
    return Error(what +
                 " sets interactiveMode Always, but driver-manager runs in a pod without a terminal; use a "
                 "plugin that can run with interactiveMode Never or IfAvailable");
  return Error(what + " has interactiveMode \"" + mode + "\"; expected Never, IfAvailable or Always");
}

Result<ExecConfig> read_exec(const YAML::Node& exec, const std::string& what, const fs::path& dir) {
  if (!exec.IsMap()) return Error(what + " is not a mapping");
  ExecConfig ec;
  ec.command = str(exec, "command");
  if (ec.command.empty()) return Error(what + " has no command");
  if (ec.command.find('/') != std::string::npos) ec.command = resolve(dir, ec.command);
  ec.api_version = str(exec, "apiVersion");
  if (ec.api_version != "client.authentication.k8s.io/v1" &&
      ec.api_version != "client.authentication.k8s.io/v1beta1") {
    return Error(what + " has apiVersion \"" + ec.api_version +
                 "\"; driver-manager supports client.authentication.k8s.io/v1 and v1beta1");
  }
  auto mode = interactive_mode(exec, what, ec.api_version);
  if (!mode) return mode.error();
  ec.interactive_mode = *mode;
  if (const YAML::Node args = exec["args"]; args.IsDefined() && !args.IsNull()) {
    if (!args.IsSequence()) return Error(what + " args is not a list");
    for (const auto& a : args) ec.args.push_back(a.as<std::string>());
  }
  if (const YAML::Node env = exec["env"]; env.IsDefined() && !env.IsNull()) {
    if (!env.IsSequence()) return Error(what + " env is not a list");
    for (const auto& e : env) {
      if (!e.IsMap() || str(e, "name").empty()) return Error(what + " env has an entry without a name");
      ec.env.emplace_back(str(e, "name"), str(e, "value"));
    }
  }
  if (const YAML::Node v = exec["provideClusterInfo"]; v.IsDefined() && !v.IsNull())
    ec.provide_cluster_info = v.as<bool>();
  ec.install_hint = str(exec, "installHint");
  return ec;
}

Status read_user(const YAML::Node& user, const std::string& user_what, const fs::path& dir, Config& cfg) {
  if (auto st = pem_data_or_file(user, "client-certificate", user_what, dir, cfg.client_cert_data,
                                 cfg.client_cert_file);
      !st)
    return st;
  if (auto st =
          pem_data_or_file(user, "client-key", user_what, dir, cfg.client_key_data, cfg.client_key_file);
      !st)
    return st;
  const bool has_cert = !cfg.client_cert_data.empty() || !cfg.client_cert_file.empty();
  const bool has_key = !cfg.client_key_data.empty() || !cfg.client_key_file.empty();
  if (has_cert != has_key) {
    return Error(user_what + " has a client " +
                 (has_cert ? "certificate but no key" : "key but no certificate"));
  }
  cfg.token = str(user, "token");
  if (cfg.token.empty()) {
    if (const std::string f = str(user, "tokenFile"); !f.empty()) {
      cfg.token_file = resolve(dir, f);
      auto tok = read_whole_file(cfg.token_file);
      if (!tok) return tok.error().wrap("tokenFile of " + user_what);
      cfg.token = trim(*tok);
      if (cfg.token.empty()) return Error("tokenFile " + cfg.token_file + " of " + user_what + " is empty");
    }
  }
  if (const YAML::Node exec = user["exec"]; exec.IsDefined() && !exec.IsNull()) {
    if (!cfg.token.empty() || has_cert) {
      return Error(user_what +
                   " sets both exec and a token or client certificate; keep one of them (the exec plugin, or "
                   "the static credentials)");
    }
    auto ec = read_exec(exec, user_what + " exec", dir);
    if (!ec) return ec.error();
    cfg.exec = std::move(*ec);
    return {};
  }
  if (const YAML::Node ap = user["auth-provider"]; ap.IsDefined() && cfg.token.empty() && !has_cert) {
    return Error(
        user_what + " authenticates through the auth-provider plugin \"" +
        (ap.IsMap() ? str(ap, "name") : std::string()) +
        "\", which client-go removed in Kubernetes 1.26 and driver-manager does not support; use "
        "its exec credential plugin instead (gke-gcloud-auth-plugin for gcp, kubelogin for azure and "
        "oidc), or a token or client certificate");
  }
  return {};
}

Result<Config> parse_kubeconfig(const std::string& path, const YAML::Node& root, const std::string& wanted) {
  const fs::path dir = fs::absolute(fs::path(path)).parent_path();
  std::string ctx_name = wanted;
  if (ctx_name.empty()) {
    ctx_name = str(root, "current-context");
    if (ctx_name.empty())
      return Error(
          "no current-context is set; pass a context name or set one with kubectl config use-context");
  }
  const auto ctx = find_named(root, "contexts", "context", ctx_name);
  if (!ctx) return Error("context \"" + ctx_name + "\" not found");

  Config cfg;
  cfg.source = "kubeconfig " + path + " (context " + ctx_name + ")";
  const std::string cluster_name = str(*ctx, "cluster");
  const std::string user_name = str(*ctx, "user");
  if (const std::string ns = str(*ctx, "namespace"); !ns.empty()) cfg.ns = ns;

  if (cluster_name.empty()) return Error("context \"" + ctx_name + "\" names no cluster");
  const auto cluster = find_named(root, "clusters", "cluster", cluster_name);
  if (!cluster) return Error("cluster \"" + cluster_name + "\" (of context \"" + ctx_name + "\") not found");
  if (auto st = read_cluster(*cluster, "cluster \"" + cluster_name + "\"", dir, cfg); !st) return st.error();

  if (user_name.empty()) return cfg;  // anonymous access
  const auto user = find_named(root, "users", "user", user_name);
  if (!user) return Error("user \"" + user_name + "\" (of context \"" + ctx_name + "\") not found");
  if (auto st = read_user(*user, "user \"" + user_name + "\"", dir, cfg); !st) return st.error();
  if (cfg.exec) cfg.exec->cluster_config = exec_cluster_config(*cluster);
  return cfg;
}

}  // namespace

Result<Config> load_kubeconfig(const std::string& path, const std::string& context) {
  const std::string where = "kubeconfig " + path;
  auto text = read_whole_file(path);
  if (!text) return Error(where + ": " + text.error().message);
  YAML::Node root;
  try {
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return Error(where + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap()) return Error(where + ": not a kubeconfig (the top level is not a mapping)");
  try {
    auto cfg = parse_kubeconfig(path, root, context);
    if (!cfg) return cfg.error().wrap(where);
    return cfg;
  } catch (const YAML::Exception& e) {
    // A field of the wrong shape, e.g. a list where a string belongs.
    return Error(where + ": malformed: " + e.what());
  }
}

Result<Config> in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return Error(
        "no kubeconfig given and not running in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
        "are "
        "not set); set KUBECONFIG or --kubeconfig");
  }
  Config cfg;
  cfg.source = "in-cluster";
  std::string h = host;
  if (h.find(':') != std::string::npos && h.front() != '[') h = "[" + h + "]";  // IPv6 literal
  cfg.server = "https://" + h + ":" + port;

  cfg.token_file = (fs::path(sa_dir) / "token").string();
  auto tok = read_whole_file(cfg.token_file);
  if (!tok) return tok.error().wrap("in-cluster service-account token");
  cfg.token = trim(*tok);
  if (cfg.token.empty()) return Error("in-cluster service-account token " + cfg.token_file + " is empty");

  cfg.ca_file = (fs::path(sa_dir) / "ca.crt").string();
  if (auto st = check_readable(cfg.ca_file, "in-cluster CA certificate"); !st) return st.error();

  const std::string ns_file = (fs::path(sa_dir) / "namespace").string();
  if (fs::exists(ns_file)) {
    auto ns = read_whole_file(ns_file);
    if (!ns) return ns.error().wrap("in-cluster namespace");
    if (std::string n = trim(*ns); !n.empty()) cfg.ns = n;
  }
  return cfg;
}

Result<Config> load_config(const std::string& kubeconfig_path) {
  if (!kubeconfig_path.empty()) return load_kubeconfig(kubeconfig_path);
  return in_cluster_config();
}

}  // namespace dm::kube
