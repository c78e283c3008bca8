// Everything driver-manager's uninstall flow is configured with (flags / environment, parsed in cli/).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "common/clock.h"
#include "manager/rules/taints.h"

namespace dm::manager {

struct Settings {
  // Upstream's flags and environment variables, same defaults (README.md, Configuration).
  std::string node_name;                            // NODE_NAME (required)
  bool drain_use_force = false;                     // DRAIN_USE_FORCE
  std::string drain_pod_selector_label;             // DRAIN_POD_SELECTOR_LABEL (full-drain fallback only)
  Duration drain_timeout = Duration::zero();        // DRAIN_TIMEOUT_SECONDS; zero = no limit
  bool drain_delete_emptydir_data = false;          // DRAIN_DELETE_EMPTYDIR_DATA
  bool enable_auto_drain = true;                    // ENABLE_AUTO_DRAIN
  bool enable_gpu_pod_eviction = true;              // ENABLE_GPU_POD_EVICTION
  std::string operator_namespace = "gpu-operator";  // OPERATOR_NAMESPACE
  std::string node_label_for_gpu_pod_eviction;  // NODE_LABEL_FOR_GPU_POD_EVICTION (key only; =value stripped)
  bool gpu_direct_rdma_enabled = false;         // GPU_DIRECT_RDMA_ENABLED
  bool use_host_mofed = false;                  // USE_HOST_MOFED
  std::string kubeconfig;                       // KUBECONFIG ("" = in-cluster)
  bool force_reinstall = false;                 // FORCE_REINSTALL
  std::optional<std::string> driver_config_digest;  // DRIVER_CONFIG_DIGEST (unset = nullopt)

  // Beyond upstream (each has a flag and an environment variable, see README).
  Duration operand_wait_timeout =
      std::chrono::minutes(5);  // OPERAND_WAIT_TIMEOUT: one deadline for all operand waits
  Duration gpu_client_eviction_timeout = std::chrono::minutes(5);      // GPU_CLIENT_EVICTION_TIMEOUT
  std::string gpu_client_taint = std::string(kDefaultGpuClientTaint);  // GPU_CLIENT_TAINT
  Duration eviction_retry_interval = std::chrono::seconds(5);  // PDB-blocked (429) eviction retry interval
  Duration mofed_wait_timeout = Duration::zero();           // MOFED_WAIT_TIMEOUT; zero = no limit (upstream)
  Duration pre_installed_sleep = std::chrono::seconds(60);  // upstream's 60 s before failing on a host driver
  bool legacy_uncordon = false;             // UNCORDON_ALWAYS: upstream's uncordon-even-if-not-ours
  std::string sim_root;                     // DRIVER_MANAGER_SIM_ROOT / --sim-root: simulated host
  std::string vfio_manage = "vfio-manage";  // VFIO_MANAGE_PATH: the vfio-manage binary

  // Facts of the pod this program runs in (environment only, no flags): where to find the own pod.
  std::string pod_name;       // POD_NAME (downward API, optional)
  std::string pod_namespace;  // POD_NAMESPACE (downward API, optional)
  std::string hostname;       // HOSTNAME (a pod's hostname is its name)
};

}  // namespace dm::manager
