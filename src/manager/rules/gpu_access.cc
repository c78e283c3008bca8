#include "manager/rules/gpu_access.h"

#include "kube/objects.h"

namespace dm::manager {

using Json = nlohmann::json;
namespace {

constexpr std::string_view kCdiAnnotationPrefix = "cdi.k8s.io/";

// A CDI annotation's value is a comma-separated list of fully qualified devices, vendor/class=name.
bool names_nvidia_cdi_device(std::string_view value) {
  size_t start = 0;
  while (start <= value.size()) {
    const size_t end = std::min(value.find(',', start), value.size());
    std::string_view device = value.substr(start, end - start);
    while (!device.empty() && device.front() == ' ') device.remove_prefix(1);
    if (device.starts_with("nvidia.com/")) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

bool is_nvidia_runtime_handler(std::string_view handler) {
  return handler == "nvidia" || handler == "nvidia-cdi" || handler == "nvidia-legacy";
}

bool is_nvidia_runtime_class_name(std::string_view name) {
  return is_nvidia_runtime_handler(name);
}

namespace {

// The RuntimeClass signal: sets out.why when it counts, out.note when the class could not tell.
Status runtime_class_access(const std::string& rc, const RuntimeClassLookup& lookup, GpuAccess& out) {
  auto info = lookup(rc);
  if (!info) return info.error();
  switch (info->state) {
    case RuntimeClassInfo::State::kFound:
      if (is_nvidia_runtime_handler(info->handler)) {
        out.why = "RuntimeClass \"" + rc + "\" runs it on the NVIDIA container runtime (handler \"" +
                  info->handler + "\")";
      }
      break;
    case RuntimeClassInfo::State::kMissing:
      out.note =
          "its RuntimeClass \"" + rc + "\" does not exist, so it is not counted as a GPU pod through it";
      break;
    case RuntimeClassInfo::State::kUnreadable:
      if (is_nvidia_runtime_class_name(rc)) {
        out.why = "RuntimeClass \"" + rc +
                  "\" may not be read; its name is one the NVIDIA Container Toolkit gives its classes, so it "
                  "is taken to run on the NVIDIA container runtime";
      } else {
        out.note =
            "its RuntimeClass \"" + rc + "\" may not be read, so it is not counted as a GPU pod through it";
      }
      break;
  }
  return {};
}

}  // namespace

Result<GpuAccess> gpu_access_without_request(const Json& pod, const RuntimeClassLookup& lookup) {
  GpuAccess out;
  if (kube::controlled_by_kind(pod, "DaemonSet")) return out;
  const std::string rc = kube::pod_runtime_class_name(pod);
  if (!rc.empty() && lookup) {
    if (auto st = runtime_class_access(rc, lookup, out); !st) return st.error();
    if (!out.why.empty()) return out;
  }
  for (const auto& v : kube::container_env_values(pod, kube::kVisibleDevicesEnv)) {
    if (v.empty() || v == "void" || v == "none") continue;
    out.why = std::string(kube::kVisibleDevicesEnv) + "=" + v + " in a container";
    return out;
  }
  for (const auto& [key, value] : kube::annotations(pod)) {
    if (key.starts_with(kCdiAnnotationPrefix) && names_nvidia_cdi_device(value)) {
      out.why = "CDI annotation ";
      out.why += key;
      out.why += '=';
      out.why += value;
      return out;
    }
  }
  return out;
}

}  // namespace dm::manager
