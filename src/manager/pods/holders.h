// Names the processes holding the NVIDIA driver by pod, so "driver is in use" becomes an action: the host
// finds them (pid, command, pod UID from the process's cgroup) and the node's pod list turns each UID into
// namespace/name.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "host/devices.h"
#include "manager/pods/pod_watch.h"

namespace dm::manager {

// One line per process: "nvidia: held by pid 4242 (python3) in pod ml/train-0", "nvidia, nvidia_uvm: held
// by pid 17 (nvidia-smi), a host process, not a pod", or "... in pod with UID <uid>" when the UID is not
// among `pods`.
std::vector<std::string> describe_holders(const std::vector<host::HolderProcess>& holders,
                                          const PodList& pods);

// `error` (a refused unload) with the holders appended; not logged: whoever handles the error logs it, once.
Error name_driver_holders(const Error& error, const std::vector<host::HolderProcess>& holders,
                          const PodList& pods);

}  // namespace dm::manager
