#include "support/cluster.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dm::test {

std::string kubectl_program() {
  const char* cache = std::getenv("K8S_CACHE");
  const std::string built =
      std::string(cache != nullptr && *cache != '\0' ? cache : "/var/cache/driver-manager-test-cluster") +
      "/bin/kubectl";
  return ::access(built.c_str(), X_OK) == 0 ? built : "kubectl";
}

std::unique_ptr<TestCluster> TestCluster::start() {
  // The cluster tears itself down if this test process dies without running the destructor.
  auto out =
      run_command({source_path("scripts/cluster"), "up"}, {}, {{"K8S_WATCH_PID", std::to_string(getpid())}});
  if (out.exit_code != 0) {
    throw std::runtime_error("scripts/cluster up failed (" + std::to_string(out.exit_code) + "):\n" +
                             out.err);
  }
  std::string kc = out.out;
  while (!kc.empty() && (kc.back() == '\n' || kc.back() == '\r')) kc.pop_back();
  std::unique_ptr<TestCluster> c(new TestCluster());
  c->kubeconfig_ = kc;
  c->state_dir_ = std::filesystem::path(kc).parent_path().string();
  return c;
}

TestCluster::~TestCluster() {
  if (!state_dir_.empty()) run_command({source_path("scripts/cluster"), "down", state_dir_});
}

void TestCluster::stop_apiserver(int n) const {
  auto out = run_command({source_path("scripts/cluster"), "apiserver-stop", state_dir_, std::to_string(n)});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster apiserver-stop failed:\n" + out.err);
}

void TestCluster::restart_controllers() const {
  auto out = run_command({source_path("scripts/cluster"), "controllers-restart", state_dir_});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster controllers-restart failed:\n" + out.err);
}

void TestCluster::start_apiserver(int n, const std::string& program) const {
  std::vector<std::string> argv{source_path("scripts/cluster"), "apiserver-start", state_dir_,
                                std::to_string(n)};
  if (!program.empty()) argv.push_back(program);
  auto out = run_command(argv);
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster apiserver-start failed:\n" + out.err);
}

int TestCluster::etcd_leader() const {
  auto out = run_command({source_path("scripts/cluster"), "etcd-leader", state_dir_});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster etcd-leader failed:\n" + out.err);
  return std::stoi(out.out);
}

void TestCluster::stop_etcd(int n) const {
  auto out = run_command({source_path("scripts/cluster"), "etcd-stop", state_dir_, std::to_string(n)});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster etcd-stop failed:\n" + out.err);
}

void TestCluster::start_etcd(int n) const {
  auto out = run_command({source_path("scripts/cluster"), "etcd-start", state_dir_, std::to_string(n)});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster etcd-start failed:\n" + out.err);
}

void TestCluster::freeze_etcd(int n) const {
  auto out = run_command({source_path("scripts/cluster"), "etcd-freeze", state_dir_, std::to_string(n)});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster etcd-freeze failed:\n" + out.err);
}

void TestCluster::thaw_etcd(int n) const {
  auto out = run_command({source_path("scripts/cluster"), "etcd-thaw", state_dir_, std::to_string(n)});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster etcd-thaw failed:\n" + out.err);
}

std::uint64_t TestCluster::etcd_applied_index(int n) const {
  auto out = run_command({source_path("scripts/cluster"), "etcd-applied", state_dir_, std::to_string(n)});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster etcd-applied failed:\n" + out.err);
  return std::stoull(out.out);
}

int TestCluster::add_apiserver(const std::string& program) const {
  const std::string url_file = state_dir_ + "/kube-apiserver-2.url";
  if (std::filesystem::exists(state_dir_ + "/kube-apiserver-2.cmd")) {
    start_apiserver(2, program);
  } else {
    std::vector<std::string> argv{source_path("scripts/cluster"), "apiserver-add", state_dir_};
    if (!program.empty()) argv.push_back(program);
    auto out = run_command(argv);
    if (out.exit_code != 0) throw std::runtime_error("scripts/cluster apiserver-add failed:\n" + out.err);
  }
  std::ifstream in(url_file);
  std::string url;
  std::getline(in, url);
  const auto colon = url.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("no port in " + url_file + ": " + url);
  return std::stoi(url.substr(colon + 1));
}

std::string TestCluster::apiserver_version(int n) const {
  auto out =
      run_command({source_path("scripts/cluster"), "apiserver-version", state_dir_, std::to_string(n)});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster apiserver-version failed:\n" + out.err);
  std::string v = out.out;
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

std::string TestCluster::apiserver_program() const {
  std::ifstream in(state_dir_ + "/apiserver.cmd");
  std::string program;
  in >> program;  // the first word of the saved command line (a path without blanks)
  if (program.empty()) throw std::runtime_error("no saved command line in " + state_dir_ + "/apiserver.cmd");
  return program;
}

void TestCluster::freeze_apiserver() const {
  auto out = run_command({source_path("scripts/cluster"), "apiserver-freeze", state_dir_});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster apiserver-freeze failed:\n" + out.err);
}

void TestCluster::thaw_apiserver() const {
  auto out = run_command({source_path("scripts/cluster"), "apiserver-thaw", state_dir_});
  if (out.exit_code != 0) throw std::runtime_error("scripts/cluster apiserver-thaw failed:\n" + out.err);
}

CommandOutput TestCluster::kubectl(const std::vector<std::string>& args,
                                   const std::string& stdin_data) const {
  std::vector<std::string> argv = {kubectl_program(), "--kubeconfig", kubeconfig_};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, stdin_data);
}

void TestCluster::apply(const std::string& yaml) const {
  auto out = kubectl({"apply", "-f", "-"}, yaml);
  if (out.exit_code != 0) throw std::runtime_error("kubectl apply failed: " + out.err + "\n" + yaml);
}

bool TestCluster::serves(const std::string& group_version) const {
  return kubectl({"get", "--raw", "/apis/" + group_version}).exit_code == 0;
}

nlohmann::json TestCluster::get_json(const std::vector<std::string>& args) const {
  std::vector<std::string> a = {"get"};
  a.insert(a.end(), args.begin(), args.end());
  a.emplace_back("-o");
  a.emplace_back("json");
  auto out = kubectl(a);
  if (out.exit_code != 0) throw std::runtime_error("kubectl get failed: " + out.err);
  return nlohmann::json::parse(out.out);
}

std::vector<nlohmann::json> TestCluster::audit_events() const {
  std::vector<nlohmann::json> events;
  std::istringstream in(read_file(audit_log_path()));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) events.push_back(std::move(j));
  }
  return events;
}

std::string TestCluster::service_account_kubeconfig(const std::string& ns, const std::string& name,
                                                    const std::string& cluster_role,
                                                    const std::string& role) const {
  std::string yaml =
      "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
      "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: " + ns +
      "-" + name +
      "\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: " + cluster_role +
      "\nsubjects:\n- kind: ServiceAccount\n  name: " + name + "\n  namespace: " + ns + "\n";
  if (!role.empty()) {
    yaml += "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: " + name +
            "\n  namespace: " + ns +
            "\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: " + role +
            "\nsubjects:\n- kind: ServiceAccount\n  name: " + name + "\n  namespace: " + ns + "\n";
  }
  apply(yaml);
  // A bound, expiring token from the TokenRequest API, as the kubelet gets one for a pod (no token Secrets
  // since Kubernetes 1.24). A day outlives any test.
  std::string token;
  if (!eventually(
          [&] {
            auto tok = kubectl({"-n", ns, "create", "token", name, "--duration=24h"});
            if (tok.exit_code != 0) return false;
            token = tok.out;
            while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
            return !token.empty();
          },
          60)) {
    throw std::runtime_error("no token for service account " + ns + "/" + name);
  }
  auto server =
      kubectl({"config", "view", "--minify", "--raw", "-o", "jsonpath={.clusters[0].cluster.server}"});
  auto ca = kubectl({"config", "view", "--minify", "--raw", "-o",
                     "jsonpath={.clusters[0].cluster.certificate-authority-data}"});
  std::string path = state_dir_ + "/sa-" + ns + "-" + name + ".kubeconfig";
  write_file(path,
             "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server.out +
                 "\n    certificate-authority-data: " + ca.out +
                 "\nusers:\n- name: u\n  user:\n    token: " + token +
                 "\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: " + ns +
                 "\ncurrent-context: c\n");
  return path;
}

bool eventually(const std::function<bool()>& pred, double timeout_s, std::chrono::milliseconds poll) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(poll);
  }
}

}  // namespace dm::test
