// What `plan` decides from: the node, its pods, the budgets and claims, the own pod, and the host as read on
// the node or inferred off it. read.h fills it from the API and the host, wave.h per node of a wave; unit
// tests build it by hand.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "host/host.h"
#include "manager/commands/own_pod.h"
#include "manager/rules/pod_rules.h"
#include "manager/rules/skip.h"

namespace dm::manager {

// Everything the plan is decided from. The reads fill it (read_plan_inputs); unit tests build it by hand.
struct PlanInputs {
  nlohmann::json node;  // GET node
  // When the node was read: a lease's time left counts from it (unset: a lease's state is not judged).
  std::optional<std::chrono::system_clock::time_point> read_at;
  std::vector<nlohmann::json> pods;  // the pods on the node
  PodFacts facts;                    // DaemonSet and ResourceClaim lookups (null functions: none asked)

  std::optional<OwnPodRef> own_pod_ref;
  std::optional<OwnPod> own_pod;
  std::string own_pod_error;  // the own pod could not be read (e.g. forbidden)

  std::optional<std::vector<nlohmann::json>> pdbs;  // nullopt: not readable
  std::string pdb_version = "v1";                   // policy/<version> the list came from
  std::string pdb_error;                            // why they could not be read

  // The host.
  std::optional<std::string> host_driver_version;
  Status can_unload;
  bool nvidia_loaded = false;
  bool nouveau_loaded = false;
  std::vector<host::ModuleState> modules;    // the loaded modules of host::kNvidiaModules, unload order
  std::vector<host::HolderProcess> holders;  // processes with NVIDIA device files open
  std::vector<std::string> mounts;           // mount points under the driver root (host paths)
  std::string mounts_error;                  // the mount table could not be read
  SkipDecision skip;
  std::optional<std::string> mellanox_device;  // only looked for with GPU_DIRECT_RDMA_ENABLED
  bool mofed_ready = false;
  // Off the node (on_node false) the host is not read: the facts above are inferred from the API
  // (infer_host_from_api) and the modules, holders and mounts are "on the node only".
  bool on_node = true;
  std::string host_note;  // off the node: where the inferred facts come from

  std::optional<std::vector<nlohmann::json>> claims;  // the cluster's ResourceClaims; nullopt: not read
  std::string claims_note;                            // why they were not read
  size_t gpu_slices = 0;  // the node's gpu.nvidia.com ResourceSlices (0 when they could not be listed)
};

}  // namespace dm::manager
