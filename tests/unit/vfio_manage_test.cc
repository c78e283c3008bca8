// vfio-manage on a fake sysfs tree (DRIVER_MANAGER_SIM_ROOT): enumeration, bind/unbind writes, the graphics
// auxiliary function, NVSwitch handling, modprobe, per-device errors and the command line's exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "host/host.h"
#include "support/doubles.h"
#include "support/process.h"
#include "vfio/command.h"
#include "vfio/vfio.h"

namespace dm::vfio {
namespace {

using test::LogCapture;

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kRelease = "6.1.0-test";
constexpr const char* kUntouched = "untouched";

// Records the commands it is asked to run instead of running them.
class RecordingRunner final : public host::CommandRunner {
 public:
  host::CommandResult run(const std::vector<std::string>& argv) override {
    commands.push_back(argv);
    return host::CommandResult{0, ""};
  }
  std::vector<std::vector<std::string>> commands;
};

class VfioTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::make_temp_dir("dm-vfio");
    for (const auto* d : {"nvidia", "vfio-pci", "snd_hda_intel", "nvgrace-gpu-vfio-pci", "e1000e"}) driver(d);
    device("0000:01:00.0", "0x10de", "0x030200", "0x2330", "vfio-pci");  // 3D controller (H100)
    device("0000:01:00.4", "0x10de", "0x030200", "0x2330", "");          // its SR-IOV VF
    fs::create_symlink("../0000:01:00.0", dev("0000:01:00.4") + "/physfn");
    device("0000:02:00.0", "0x10de", "0x030000", "0x2204", "nvidia");         // VGA GPU ...
    device("0000:02:00.1", "0x10de", "0x040300", "0x1aef", "snd_hda_intel");  // ... and its HD audio
    fs::create_symlink("../0000:02:00.1", dev("0000:02:00.0") + "/consumer:pci:0000:02:00.1");
    fs::create_symlink("../0000:09:00.0", dev("0000:02:00.0") + "/consumer:pci:0000:09:00.0");  // dangling
    device("0000:03:00.0", "0x10de", "0x068000", "0x22a3", "nvidia");                           // NVSwitch
    device("0000:04:00.0", "0x8086", "0x020000", "0x1533", "e1000e");                           // not NVIDIA
    device("0000:05:00.0", "0x10de", "0x058000", "0x1234", "");  // NVIDIA, neither GPU nor NVSwitch
    host_ = host::make_host(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  [[nodiscard]] std::string dev(const std::string& bdf) const {
    return root_ + "/sys/bus/pci/devices/" + bdf;
  }
  [[nodiscard]] std::string drv(const std::string& name) const {
    return root_ + "/sys/bus/pci/drivers/" + name;
  }
  [[nodiscard]] std::string file(const std::string& p) const { return test::read_file(p); }

  void driver(const std::string& name) {
    test::write_file(drv(name) + "/bind", "");
    test::write_file(drv(name) + "/unbind", "");
  }
  void device(const std::string& bdf, const std::string& vendor, const std::string& cls,
              const std::string& id, const std::string& bound_to) {
    const std::string d = dev(bdf);
    test::write_file(d + "/vendor", vendor + "\n");
    test::write_file(d + "/device", id + "\n");
    test::write_file(d + "/class", cls + "\n");
    std::string hex_id = id.substr(2);
    for (auto& c : hex_id) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::string hex_vendor = vendor.substr(2);
    for (auto& c : hex_vendor) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    test::write_file(d + "/modalias",
                     "pci:v0000" + hex_vendor + "d0000" + std::string(4 - hex_id.size(), '0') + hex_id +
                         "sv000010DEsd000016C1bc" + cls.substr(2, 2) + "sc" + cls.substr(4, 2) + "i00\n");
    test::write_file(d + "/driver_override", kUntouched);
    if (!bound_to.empty()) fs::create_symlink(drv(bound_to), d + "/driver");
  }
  void aliases(const std::string& text) {
    test::write_file(root_ + "/lib/modules/" + kRelease + "/modules.alias", text);
  }
  void modprobe(const std::string& body) {
    test::write_file(root_ + "/sbin/modprobe", "#!/bin/sh\n" + body);
    fs::permissions(root_ + "/sbin/modprobe", fs::perms::owner_all);
  }
  int run(Action action, const std::optional<std::string>& bdf = std::nullopt, bool nvswitches = false) {
    VfioConfig cfg;
    cfg.include_nvswitches = nvswitches;
    cfg.simulated = true;
    cfg.kernel_release = kRelease;
    VfioManager m(*host_, *host_, cfg);
    return m.run(action, bdf);
  }

  std::string root_;
  std::unique_ptr<host::Host> host_;
};

TEST_F(VfioTest, UnbindAllUnbindsGpusAndTheAuxiliaryFunctionOnly) {
  LogCapture logs;
  EXPECT_EQ(run(Action::kUnbind), 0);
  EXPECT_EQ(file(dev("0000:01:00.0") + "/driver_override"), "\n");
  EXPECT_EQ(file(drv("vfio-pci") + "/unbind"), "0000:01:00.0");
  EXPECT_EQ(file(dev("0000:02:00.0") + "/driver_override"), "\n");
  EXPECT_EQ(file(drv("nvidia") + "/unbind"), "0000:02:00.0");
  EXPECT_EQ(file(dev("0000:02:00.1") + "/driver_override"), "\n");
  EXPECT_EQ(file(drv("snd_hda_intel") + "/unbind"), "0000:02:00.1");
  for (const auto* untouched : {"0000:01:00.4", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"}) {
    EXPECT_EQ(file(dev(untouched) + "/driver_override"), kUntouched) << untouched;
  }
  EXPECT_EQ(file(drv("e1000e") + "/unbind"), "");
  for (const auto* d : {"vfio-pci", "nvidia", "snd_hda_intel"}) EXPECT_EQ(file(drv(d) + "/bind"), "") << d;
  EXPECT_THAT(logs.text(), HasSubstr("info Unbinding device 0000:01:00.0"));
  EXPECT_THAT(logs.text(), HasSubstr("info Unbinding device 0000:02:00.1"));
}

TEST_F(VfioTest, UnbindAllIncludesNvSwitchesWhenAsked) {
  EXPECT_EQ(run(Action::kUnbind, std::nullopt, /*nvswitches=*/true), 0);
  EXPECT_EQ(file(dev("0000:03:00.0") + "/driver_override"), "\n");
  EXPECT_EQ(file(drv("nvidia") + "/unbind"), "0000:03:00.0");  // written after 0000:02:00.0
}

TEST_F(VfioTest, UnbindOfAnUnboundDeviceOnlyClearsTheOverride) {
  fs::remove(dev("0000:01:00.0") + "/driver");
  EXPECT_EQ(run(Action::kUnbind, "0000:01:00.0"), 0);
  EXPECT_EQ(file(dev("0000:01:00.0") + "/driver_override"), "\n");
  EXPECT_EQ(file(drv("vfio-pci") + "/unbind"), "");
}

TEST_F(VfioTest, BindAllUsesModulesAliasWithDashFallbackAndLoadsTheModule) {
  aliases(
      "alias pci:v000010DEd*sv*sd*bc03sc*i* nvidia\n"
      "alias vfio_pci:v000010DEd00002330sv*sd*bc*sc*i* nvgrace_gpu_vfio_pci\n");
  modprobe("echo \"$@\" >> " + root_ + "/modprobe.log\n");
  LogCapture logs;
  EXPECT_EQ(run(Action::kBind), 0);
  // 0000:01:00.0 (bound to vfio-pci) moves to nvgrace-gpu-vfio-pci (the module's name with _ -> -).
  EXPECT_EQ(file(drv("vfio-pci") + "/unbind"), "0000:01:00.0");
  EXPECT_EQ(file(dev("0000:01:00.0") + "/driver_override"), "nvgrace-gpu-vfio-pci");
  EXPECT_EQ(file(drv("nvgrace-gpu-vfio-pci") + "/bind"), "0000:01:00.0");
  // The VGA GPU and its audio function go to vfio-pci (no alias matches them).
  EXPECT_EQ(file(drv("nvidia") + "/unbind"), "0000:02:00.0");
  EXPECT_EQ(file(dev("0000:02:00.0") + "/driver_override"), "vfio-pci");
  EXPECT_EQ(file(drv("snd_hda_intel") + "/unbind"), "0000:02:00.1");
  EXPECT_EQ(file(dev("0000:02:00.1") + "/driver_override"), "vfio-pci");
  EXPECT_EQ(file(drv("vfio-pci") + "/bind"), "0000:02:00.1");  // the audio function is bound last
  EXPECT_EQ(file(root_ + "/modprobe.log"), "nvgrace_gpu_vfio_pci\nvfio-pci\n");
  const std::string log = logs.text();
  EXPECT_THAT(log, HasSubstr("info Binding device 0000:01:00.0\n"));
  EXPECT_THAT(log, HasSubstr("info Binding device 0000:01:00.0 to driver: nvgrace-gpu-vfio-pci"));
  EXPECT_THAT(log, HasSubstr("info Binding device 0000:02:00.0 to driver: vfio-pci"));
  EXPECT_THAT(log, HasSubstr("info Binding device 0000:02:00.1 to driver: vfio-pci"));
  EXPECT_EQ(file(dev("0000:03:00.0") + "/driver_override"), kUntouched);
  EXPECT_EQ(file(dev("0000:01:00.4") + "/driver_override"), kUntouched);
}

TEST_F(VfioTest, BindLeavesADeviceAlreadyOnTheChosenDriverAlone) {
  EXPECT_EQ(run(Action::kBind, "0000:01:00.0"), 0);  // no modules.alias: vfio-pci, which it already has
  EXPECT_EQ(file(dev("0000:01:00.0") + "/driver_override"), kUntouched);
  EXPECT_EQ(file(drv("vfio-pci") + "/bind"), "");
  EXPECT_EQ(file(drv("vfio-pci") + "/unbind"), "");
}

TEST_F(VfioTest, BindOnTheRealHostLoadsTheModuleThroughChroot) {
  RecordingRunner recording;
  VfioConfig cfg;
  cfg.host_root = "/host";
  cfg.kernel_release = kRelease;
  VfioManager m(*host_, recording, cfg);
  EXPECT_EQ(m.run(Action::kBind, "0000:02:00.0"), 0);
  EXPECT_THAT(recording.commands, ElementsAre(ElementsAre("chroot", "/host", "modprobe", "vfio-pci")));
}

TEST_F(VfioTest, MissingDriverDirectoryFailsTheDeviceButNotAll) {
  fs::remove_all(drv("vfio-pci"));
  fs::remove(dev("0000:01:00.0") + "/driver");
  {
    LogCapture logs;
    EXPECT_EQ(run(Action::kBind, "0000:01:00.0"), 1);
    EXPECT_THAT(logs.text(), HasSubstr("critical failed to bind device 0000:01:00.0: driver directory"));
    EXPECT_THAT(logs.text(), HasSubstr("is the module vfio-pci loaded?"));
  }
  LogCapture logs;
  EXPECT_EQ(run(Action::kBind), 0);
  EXPECT_THAT(logs.text(), HasSubstr("warning Failed to bind device 0000:01:00.0:"));
  EXPECT_THAT(logs.text(), HasSubstr("warning Failed to bind device 0000:02:00.0:"));
}

TEST_F(VfioTest, ModprobeFailureIsReportedWithItsOutput) {
  modprobe("echo \"modprobe: FATAL: Module $1 not found\" >&2\nexit 1\n");
  LogCapture logs;
  EXPECT_EQ(run(Action::kBind, "0000:02:00.0"), 1);
  EXPECT_THAT(logs.text(), HasSubstr("failed to load kernel module vfio-pci"));
  EXPECT_THAT(logs.text(), HasSubstr("modprobe: FATAL: Module vfio-pci not found"));
  EXPECT_EQ(file(dev("0000:02:00.0") + "/driver_override"), kUntouched);
}

TEST_F(VfioTest, DeviceIdDecisions) {
  {
    LogCapture logs;
    EXPECT_EQ(run(Action::kUnbind, "0000:04:00.0"), 0);
    EXPECT_THAT(logs.text(), HasSubstr("info Device 0000:04:00.0 is not an NVIDIA device"));
    EXPECT_EQ(file(drv("e1000e") + "/unbind"), "");
  }
  {
    LogCapture logs;
    EXPECT_EQ(run(Action::kUnbind, "0000:07:00.0"), 1);
    EXPECT_THAT(logs.text(),
                HasSubstr("critical failed to get NVIDIA device: device 0000:07:00.0 not found"));
  }
  {
    LogCapture logs;
    EXPECT_EQ(run(Action::kUnbind, "0000:03:00.0"), 0);
    EXPECT_THAT(logs.text(), HasSubstr("0000:03:00.0 is an NVSwitch"));
    EXPECT_EQ(file(dev("0000:03:00.0") + "/driver_override"), kUntouched);
  }
  {
    LogCapture logs;
    EXPECT_EQ(run(Action::kUnbind, "0000:05:00.0"), 0);
    EXPECT_THAT(logs.text(), HasSubstr("0000:05:00.0 is neither an NVIDIA GPU nor an NVSwitch"));
    EXPECT_EQ(file(dev("0000:05:00.0") + "/driver_override"), kUntouched);
  }
  EXPECT_EQ(run(Action::kUnbind, "0000:03:00.0", /*nvswitches=*/true), 0);
  EXPECT_EQ(file(dev("0000:03:00.0") + "/driver_override"), "\n");
  EXPECT_EQ(file(drv("nvidia") + "/unbind"), "0000:03:00.0");
}

// The command line, as driver-manager runs it: environment in, exit code and logrus lines out.
class VfioCliTest : public VfioTest {
 protected:
  void SetUp() override {
    VfioTest::SetUp();
    ::setenv("DRIVER_MANAGER_SIM_ROOT", root_.c_str(), 1);
    ::unsetenv("BIND_NVSWITCHES");
  }
  void TearDown() override {
    ::unsetenv("DRIVER_MANAGER_SIM_ROOT");
    ::unsetenv("BIND_NVSWITCHES");
    VfioTest::TearDown();
  }
  int cli(std::vector<const char*> args) {
    args.insert(args.begin(), "vfio-manage");
    ::testing::internal::CaptureStderr();
    ::testing::internal::CaptureStdout();
    const int rc = vfio_manage_main(static_cast<int>(args.size()), args.data());
    out_ = ::testing::internal::GetCapturedStdout();
    err_ = ::testing::internal::GetCapturedStderr();
    return rc;
  }
  std::string out_;
  std::string err_;
};

TEST_F(VfioCliTest, UnbindAllOnTheSimulatedTree) {
  EXPECT_EQ(cli({"unbind", "--all"}), 0);
  EXPECT_EQ(file(drv("vfio-pci") + "/unbind"), "0000:01:00.0");
  EXPECT_EQ(file(dev("0000:03:00.0") + "/driver_override"), kUntouched);
  EXPECT_THAT(err_,
              ::testing::ContainsRegex("time=[0-9TZ:-]+ level=info msg=Unbinding device 0000:01:00.0\n"));
}

TEST_F(VfioCliTest, NvSwitchesFromTheEnvironmentOrTheFlag) {
  ::setenv("BIND_NVSWITCHES", "true", 1);
  EXPECT_EQ(cli({"unbind", "-a"}), 0);
  EXPECT_EQ(file(dev("0000:03:00.0") + "/driver_override"), "\n");

  test::write_file(dev("0000:03:00.0") + "/driver_override", kUntouched);
  ::setenv("BIND_NVSWITCHES", "", 1);  // set but empty: false, as with urfave/cli
  EXPECT_EQ(cli({"unbind", "-a"}), 0);
  EXPECT_EQ(file(dev("0000:03:00.0") + "/driver_override"), kUntouched);

  EXPECT_EQ(cli({"unbind", "-d", "0000:03:00.0", "--unbind-nvswitches"}), 0);
  EXPECT_EQ(file(dev("0000:03:00.0") + "/driver_override"), "\n");
}

TEST_F(VfioCliTest, BadNvSwitchEnvironmentValueExitsOne) {
  ::setenv("BIND_NVSWITCHES", "yes", 1);
  EXPECT_EQ(cli({"unbind", "--all"}), 1);
  EXPECT_THAT(err_,
              HasSubstr("level=fatal msg=could not parse \"yes\" as bool value from environment variable "
                        "\"BIND_NVSWITCHES\""));
  EXPECT_EQ(file(drv("vfio-pci") + "/unbind"), "");
}

TEST_F(VfioCliTest, AllAndDeviceIdAreExclusiveAndOneIsRequired) {
  EXPECT_EQ(cli({"unbind"}), 1);
  EXPECT_THAT(err_, HasSubstr("level=fatal msg=either --all or --device-id must be specified"));
  EXPECT_EQ(cli({"bind", "--all", "--device-id", "0000:01:00.0"}), 1);
  EXPECT_THAT(err_, HasSubstr("level=fatal msg=cannot specify both --all and --device-id"));
  EXPECT_EQ(file(drv("vfio-pci") + "/unbind"), "");
}

TEST_F(VfioCliTest, MalformedDeviceIdExitsOne) {
  EXPECT_EQ(cli({"unbind", "--device-id", "01:00.0"}), 1);
  EXPECT_THAT(err_, HasSubstr("level=fatal msg=invalid device ID \"01:00.0\""));
  EXPECT_EQ(file(dev("0000:01:00.0") + "/driver_override"), kUntouched);
}

TEST_F(VfioCliTest, NonNvidiaDeviceExitsZero) {
  EXPECT_EQ(cli({"unbind", "-d", "0000:04:00.0"}), 0);
  EXPECT_THAT(err_, HasSubstr("level=info msg=Device 0000:04:00.0 is not an NVIDIA device"));
  EXPECT_EQ(file(drv("e1000e") + "/unbind"), "");
}

TEST_F(VfioCliTest, OptionsBelongToTheirSubcommand) {
  EXPECT_EQ(cli({"unbind", "--all", "--bind-nvswitches"}), 1);
  EXPECT_EQ(cli({"unbind", "--all", "--host-root", "/host"}), 1);
  EXPECT_EQ(file(drv("vfio-pci") + "/unbind"), "");
}

TEST_F(VfioCliTest, HelpExitsZero) {
  EXPECT_EQ(cli({"--help"}), 0);
  EXPECT_THAT(out_, HasSubstr("bind"));
  EXPECT_THAT(out_, HasSubstr("unbind"));
  EXPECT_EQ(cli({"bind", "--help"}), 0);
  EXPECT_THAT(out_, HasSubstr("--host-root"));
  EXPECT_THAT(out_, HasSubstr("HOST_ROOT"));
  EXPECT_THAT(out_, HasSubstr("--bind-nvswitches"));
}

TEST_F(VfioCliTest, SimulatedTreeWithoutPciDevicesIsNothingToDo) {
  fs::remove_all(root_ + "/sys");
  EXPECT_EQ(cli({"unbind", "--all"}), 0);
  EXPECT_THAT(err_, HasSubstr("No NVIDIA devices found"));
}

}  // namespace
}  // namespace dm::vfio
