// node-sim: a simulated kubelet for tests and the demo (see docs/node-sim.md).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <filesystem>

#include "common/clock.h"
#include "common/log.h"
#include "kube/client.h"
#include "kube/config.h"
#include "simulator.h"

namespace {

// The one piece of global mutable state allowed: written by the signal handler, read through a CancelToken.
std::atomic<bool> g_stop{false};

extern "C" void on_signal(int /*sig*/) {
  g_stop.store(true);
}

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"node-sim: a simulated kubelet for one Node, with a simulated NVIDIA kernel module refcount"};
  std::string kubeconfig;
  std::string log_level = "info";
  nodesim::SimOptions opt;
  bool no_driver = false;
  double heartbeat_s = 10;
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig of a user allowed to manage nodes, pods and leases")
      ->required();
  app.add_option("--node", opt.node, "name of the Node to register and run")->required();
  app.add_option("--sim-root", opt.sim_root,
                 "root of the simulated host (sys/module/... is written under it)")
      ->required();
  app.add_option("--gpus", opt.gpus,
                 "nvidia.com/gpu capacity of the node (with --kernel-only, 0 leaves it to a device plugin)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--no-driver", no_driver, "do not create the NVIDIA module files (driver not loaded)");
  app.add_flag(
      "--kernel-only", opt.kernel_only,
      "a real kubelet runs the node: only publish nvidia.com/gpu, keep the simulated kernel and load "
      "the driver for pods annotated node-sim/loads-driver");
  app.add_option("--heartbeat-seconds", heartbeat_s, "interval of node status and lease renewals")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--log-level", log_level, "debug, info, warning or error")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (auto st = dm::parse_log_level(log_level); !st) {
    std::fprintf(stderr, "node-sim: %s\n", st.error().message.c_str());
    return 2;
  }
  dm::setup_logging(dm::LogFormat::kText, log_level);
  opt.driver = !no_driver;
  opt.heartbeat = std::chrono::milliseconds(static_cast<int64_t>(heartbeat_s * 1000));
  install_signal_handlers();

  const dm::CancelToken cancel(&g_stop);
  const dm::SystemClock clock;
  auto config = dm::kube::load_kubeconfig(kubeconfig);
  if (!config) {
    spdlog::critical("node-sim: {}", config.error().message);
    return 1;
  }
  dm::kube::ClientOptions copt;
  copt.user_agent = "node-sim/" + opt.node;
  copt.clock = &clock;
  copt.cancel = cancel;
  auto watch_client = dm::kube::Client::create(*config, copt);
  auto client = dm::kube::Client::create(*config, copt);
  if (!watch_client || !client) {
    spdlog::critical("node-sim: cannot create a Kubernetes client from {}: {}", kubeconfig,
                     (!client ? client : watch_client).error().message);
    return 1;
  }
  nodesim::Simulator sim(opt, std::move(*watch_client), std::move(*client), clock, cancel);
  spdlog::info("node-sim: node {}, sim root {}, {} GPU(s){}{}", opt.node, opt.sim_root, opt.gpus,
               opt.driver ? "" : ", no driver",
               opt.kernel_only ? ", kernel only (a real kubelet runs the node)" : "");
  if (auto st = sim.run(); !st) {
    spdlog::critical("node-sim for node {}: {}", opt.node, st.error().message);
    return 1;
  }
  return 0;
}
