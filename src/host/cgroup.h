// Which Kubernetes pod a process belongs to, from its /proc/<pid>/cgroup: the kubelet puts every container
// under a per-pod cgroup whose name carries the pod UID.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dm::host {

// The pod UID (with dashes) named by the cgroup paths in `proc_pid_cgroup` (the text of /proc/<pid>/cgroup,
// cgroup v1 or v2), or nullopt if the process is not in a pod. Both kubelet cgroup drivers are understood:
// systemd ("kubepods-<qos>-pod<uid>.slice", dashes of the UID written as underscores) and cgroupfs
// ("/kubepods/<qos>/pod<uid>/<container>"), whatever the runtime's leaf (containerd, CRI-O, docker).
std::optional<std::string> pod_uid_from_cgroup(std::string_view proc_pid_cgroup);

}  // namespace dm::host
