// The arm64 programs (release-arm64 preset, cross-built) on this x86-64 machine under qemu-aarch64-static:
// driver-manager runs a full uninstall_driver against the real control plane and an x86-64 node-sim, starting
// the arm64 vfio-manage as it does on a node; vfio-manage binds and unbinds on a simulated host by itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "fixtures/uninstall/fixture.h"

namespace dm::test::uninstall {
namespace {

using ::testing::HasSubstr;

constexpr const char* kQemu = "qemu-aarch64-static";
constexpr uint16_t kElfMachineAarch64 = 183;

std::string arm64_bin(const std::string& name) {
  return std::string(DM_ARM64_BIN_DIR) + "/" + name;
}

// The ELF machine of `path`, 0 when it is no ELF file (or missing).
uint16_t elf_machine(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char header[20] = {};
  if (!f.read(header, sizeof header) || std::string(header, 4) !=
                                            "\x7f"
                                            "ELF")
    return 0;
  return static_cast<uint16_t>(static_cast<unsigned char>(header[18]) |
                               (static_cast<unsigned char>(header[19]) << 8));
}

// The argv that runs the arm64 program `name` under qemu.
std::vector<std::string> under_qemu(const std::string& name, const std::vector<std::string>& args) {
  // The arm64 loader and libc: dpkg multiarch's (libc6:arm64), as in the image.
  std::vector<std::string> argv = {kQemu, arm64_bin(name)};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string driver_override(const std::string& sim_root, const std::string& bdf) {
  auto v = read_file(sim_root + "/sys/bus/pci/devices/" + bdf + "/driver_override");
  while (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

class Arm64 : public UninstallSuite {
 protected:
  void SetUp() override {
    for (const char* name : {"driver-manager", "vfio-manage"}) {
      ASSERT_EQ(elf_machine(arm64_bin(name)), kElfMachineAarch64)
          << arm64_bin(name) << " is not an arm64 program (missing? ./scripts/test builds it: cmake --preset "
          << "release-arm64 && cmake --build --preset release-arm64)";
    }
    ASSERT_EQ(run_command({"sh", "-c", std::string("command -v ") + kQemu}).exit_code, 0)
        << kQemu << " is not installed (scripts/install-deps installs it)";
  }
};

TEST_F(Arm64, DriverManagerUninstallsTheDriverAndRunsTheArm64VfioManage) {
  Scenario s(cluster(), "arm64");
  const auto ops = default_operands();
  s.deploy_operands(ops);
  s.deploy_gpu_workload("trainer");
  Client agent{.name = "agent"};
  s.deploy_client(agent);
  s.wait_running(s.operator_ns(), ops.size());
  s.wait_running(s.workload_ns(), 2);
  ASSERT_EQ(s.sim().refcnt(), 3) << "dcgm-exporter, the trainer and the annotated agent hold the GPU";
  // A GPU left bound to vfio-pci: the run unbinds it with vfio-manage.
  const std::string sim_root = s.sim().sim_root();
  ASSERT_EQ(run_command({"sh", source_path("tests/fixtures/host/fake-pci-tree.sh"), sim_root}).exit_code, 0);
  write_file(sim_root + "/sys/bus/pci/devices/0000:3b:00.0/driver_override", "vfio-pci\n");

  // driver-manager starts vfio-manage itself: without binfmt_misc, through a script that runs it under qemu
  // too (the kernel runs a script's interpreter natively, whatever the caller's architecture).
  const std::string dir = make_temp_dir("dm-arm64");
  const std::string wrapper = dir + "/vfio-manage";
  std::string script = "#!/bin/sh\nexec";
  for (const auto& a : under_qemu("vfio-manage", {})) script += " '" + a + "'";
  write_file(wrapper, script + " \"$@\"\n");
  ASSERT_EQ(::chmod(wrapper.c_str(), 0755), 0);

  auto out = run_command(under_qemu("driver-manager", {"uninstall_driver"}), {},
                         s.env(sa_kubeconfig(), {{"VFIO_MANAGE_PATH", wrapper}}));
  const std::string log = out.out + out.err;
  std::filesystem::remove_all(dir);

  ASSERT_EQ(out.exit_code, 0) << log;
  EXPECT_THAT(log, HasSubstr("Waiting for nvidia-dcgm-exporter to shutdown"));
  EXPECT_THAT(log, HasSubstr("evicting pod " + s.workload_ns() + "/trainer-"));
  EXPECT_THAT(log, HasSubstr("Cordoning node arm64"));
  EXPECT_THAT(log, HasSubstr("vfio-manage: "));
  EXPECT_THAT(log, HasSubstr("Driver uninstallation completed successfully"));
  EXPECT_FALSE(s.sim().refcnt().has_value()) << "nvidia module still loaded";
  EXPECT_EQ(driver_override(sim_root, "0000:3b:00.0"), "") << "the arm64 vfio-manage did not unbind the GPU";
  for (const auto& op : ops) EXPECT_EQ(s.label(deploy_label(op.label)), "true") << op.label;
  EXPECT_FALSE(s.unschedulable());
  EXPECT_TRUE(s.taints().empty()) << s.taints().dump();
  EXPECT_FALSE(s.has_annotation(kLeaseAnnotation));
}

TEST_F(Arm64, VfioManageFindsAndBindsTheNvidiaDevicesOfTheSimulatedHost) {
  const std::string sim = make_temp_dir("dm-arm64-vfio");
  ASSERT_EQ(run_command({"sh", source_path("tests/fixtures/host/fake-pci-tree.sh"), sim}).exit_code, 0);

  auto bind =
      run_command(under_qemu("vfio-manage", {"bind", "--all"}), {}, {{"DRIVER_MANAGER_SIM_ROOT", sim}});
  ASSERT_EQ(bind.exit_code, 0) << bind.out << bind.err;
  const std::string bind_log = bind.out + bind.err;
  for (const char* gpu : {"0000:3b:00.0", "0000:86:00.0"}) {
    EXPECT_THAT(bind_log, HasSubstr(std::string("Binding device ") + gpu + " to driver: vfio-pci"));
    EXPECT_EQ(driver_override(sim, gpu), "vfio-pci") << gpu;
  }
  EXPECT_EQ(driver_override(sim, "0000:86:00.1"), "vfio-pci") << "the VGA GPU's audio function goes along";
  EXPECT_EQ(driver_override(sim, "0000:c1:00.0"), "") << "NVSwitches stay without --bind-nvswitches";
  EXPECT_EQ(driver_override(sim, "0000:04:00.0"), "") << "not an NVIDIA device";

  auto unbind =
      run_command(under_qemu("vfio-manage", {"unbind", "--all"}), {}, {{"DRIVER_MANAGER_SIM_ROOT", sim}});
  EXPECT_EQ(unbind.exit_code, 0) << unbind.out << unbind.err;
  EXPECT_THAT(unbind.out + unbind.err, HasSubstr("Unbinding device 0000:3b:00.0"));
  for (const char* bdf : {"0000:3b:00.0", "0000:86:00.0", "0000:86:00.1"}) {
    EXPECT_EQ(driver_override(sim, bdf), "") << bdf;
  }
  std::filesystem::remove_all(sim);
}

}  // namespace
}  // namespace dm::test::uninstall
