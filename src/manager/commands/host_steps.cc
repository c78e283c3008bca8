// The steps that act on the host alone (docs/behaviour.md, Kernel modules and the driver root; MOFED wait).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <string>

#include "manager/commands/env_steps.h"
#include "manager/commands/step_def.h"
#include "manager/pods/holders.h"

namespace dm::manager {

Status unload_nvidia_modules(const StepEnv& env) {
  spdlog::info("Cleaning up NVIDIA driver");
  // The host logs "Could not unload NVIDIA driver kernel modules, driver is in use" and the module table.
  if (auto u = env.host.unload_nvidia_modules(); !u) {
    return name_driver_holders(u.error(), env.host.nvidia_holder_processes(), env.run.pods.pods())
        .wrap("failed to unload NVIDIA driver kernel modules");
  }
  return remove_stale_driver_root(env);
}

// The old driver root goes with its PID file, after the unload or when no driver is loaded.
Status remove_stale_driver_root(const StepEnv& env) {
  spdlog::info("Unmounting NVIDIA driver rootfs");
  if (auto m = env.host.unmount_driver_root(); !m)
    return m.error().wrap("failed to unmount the NVIDIA driver rootfs");
  env.host.remove_pid_file();
  return ok_status();
}

Status unload_nouveau(const StepEnv& env) {
  if (!env.host.module_loaded("nouveau")) return ok_status();
  // The host logs "Unloading nouveau driver" / "Successfully unloaded nouveau driver".
  if (auto s = env.host.unload_module("nouveau"); !s)
    return s.error().wrap("failed to unload the nouveau driver");
  return ok_status();
}

// vfio-manage's output is re-logged, not discarded: a failure must be explainable from the log.
Status unbind_vfio(const StepEnv& env) {
  const std::string& vfio_manage = env.run.settings.vfio_manage;
  spdlog::info("Unbinding vfio-pci driver from all devices");
  const auto r = env.host.run({vfio_manage, "unbind", "--all"});
  std::istringstream out(r.output);
  for (std::string line; std::getline(out, line);) {
    if (!line.empty()) spdlog::info("vfio-manage: {}", line);
  }
  if (r.exit_code == 0) return ok_status();
  spdlog::error("Unable to unbind vfio-pci driver from all devices");
  if (r.exit_code < 0) return Error("could not run " + vfio_manage + " (set VFIO_MANAGE_PATH)");
  return Error(fmt::format("{} unbind --all failed with exit code {}", vfio_manage, r.exit_code));
}

Status wait_for_mofed(const StepEnv& env) {
  const Settings& settings = env.run.settings;
  if (!settings.gpu_direct_rdma_enabled) return ok_status();
  const auto bdf = env.host.first_mellanox_device();
  if (!bdf) {
    spdlog::info("No Mellanox devices were found");
    return ok_status();
  }
  spdlog::info("Mellanox device found at {}", *bdf);
  spdlog::info("GPUDirectRDMA is enabled, validating MOFED driver installation");
  const auto deadline = settings.mofed_wait_timeout == Duration::zero()
                            ? Deadline::none()
                            : Deadline::after(env.run.clock, settings.mofed_wait_timeout);
  const auto mofed = settings.use_host_mofed ? host::Mofed::kHost : host::Mofed::kContainer;
  return host::wait_for_mofed(env.host, mofed, env.run.clock, deadline, env.run.cancel);
}

// The rows of the steps above (step_def.h).

const StepDef& remove_stale_driver_root_step() {
  static constexpr StepDef kDef{
      .step = Step::kRemoveStaleDriverRoot,
      .name = "remove-stale-driver-root",
      .run = [](StepCall& c) { return remove_stale_driver_root(c.env); },
      .render = [](StepPlan& plan) { plan.line("unmount a stale " + std::string(host::kDriverRoot)); }};
  return kDef;
}

// The skip path's: the same body, announced before its cancellation check.
const StepDef& clean_stale_mounts_step() {
  static constexpr StepDef kDef{
      .step = Step::kCleanStaleMounts,
      .name = "clean-stale-mounts",
      .run = [](StepCall& c) { return remove_stale_driver_root(c.env); },
      .before_check = [](StepCall&) { spdlog::info("Cleaning up stale mounts and state files..."); },
      .render =
          [](StepPlan& plan) {
            plan.line("unmount a stale " + std::string(host::kDriverRoot) + ", remove stale state files");
          }};
  return kDef;
}

const StepDef& unload_nouveau_step() {
  static constexpr StepDef kDef{.step = Step::kUnloadNouveau,
                                .name = "unload-nouveau",
                                .run = [](StepCall& c) { return unload_nouveau(c.env); },
                                .render =
                                    [](StepPlan& plan) {
                                      if (plan.host().nouveau_loaded) plan.line("unload nouveau");
                                    }};
  return kDef;
}

const StepDef& unbind_vfio_step() {
  static constexpr StepDef kDef{
      .step = Step::kUnbindVfio,
      .name = "unbind-vfio",
      .run = [](StepCall& c) { return unbind_vfio(c.env); },
      .render =
          [](StepPlan& plan) { plan.line("unbind vfio-pci from all devices (vfio-manage unbind --all)"); }};
  return kDef;
}

const StepDef& wait_mofed_step() {
  static constexpr StepDef kDef{
      .step = Step::kWaitMofed,
      .name = "wait-mofed",
      .run = [](StepCall& c) { return wait_for_mofed(c.env); },
      .render =
          [](StepPlan& plan) {
            if (!plan.settings().gpu_direct_rdma_enabled) return;
            const PlannedHost& h = plan.host();
            plan.line(h.mellanox_device ? "wait for MOFED (Mellanox device " + *h.mellanox_device + ", " +
                                              (h.mofed_ready ? "ready now" : "not ready now") + ")"
                                        : "MOFED: no Mellanox device, no wait");
          }};
  return kDef;
}

}  // namespace dm::manager
