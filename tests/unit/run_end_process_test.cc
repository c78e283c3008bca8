// A run that has ended ends the process: the real driver-manager against a stand-in API server in trouble
// (tests/support/stand_in_server.h) - requests answered late or never, a link gone silent, an address that
// accepts connections and never answers - exits soon after its Summary line, with the exit code of how the
// run ended (docs/behaviour.md, When the run ends). Each case prints the time from the Summary line to the
// exit, as the test saw them; the bound is the contract's, not a speed target: before it held, such a run
// stayed alive for the whole 5-minute retry budget of a request nothing cancelled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "support/process.h"
#include "support/stand_in_server.h"

namespace dm {
namespace {

using std::chrono::steady_clock;
using ::testing::HasSubstr;
using Answer = test::StandInServer::Answer;
using Request = test::StandInServer::Request;

// The contract: the process has exited this long after its Summary line (docs/behaviour.md).
constexpr double kExitBoundSeconds = 2.0;
// How long a case waits for what it waits for before it fails (never reached when the program behaves).
constexpr auto kPatience = std::chrono::seconds(60);
constexpr const char* kNode = "gpu-node-1";

std::string node_json() {
  return std::string(R"({"kind":"Node","apiVersion":"v1","metadata":{"name":")") + kNode +
         R"(","resourceVersion":"7","labels":{"kubernetes.io/hostname":")" + kNode + R"("}},"spec":{}})";
}

std::string empty_pod_list() {
  return R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]})";
}

bool is_node_get(const Request& r) {
  return r.method == "GET" && r.target == std::string("/api/v1/nodes/") + kNode;
}

bool is_pods_list(const Request& r) {
  return r.method == "GET" && r.target.rfind("/api/v1/pods?", 0) == 0 &&
         r.target.find("watch=1") == std::string::npos;
}

// A run of `driver-manager <args>` against `server_url`, its log in a file of its own.
class ProgramRun {
 public:
  ProgramRun(const std::vector<std::string>& args, const std::string& server_url)
      : dir_(test::make_temp_dir("dm-run-end")),
        process_(argv(args), dir_ + "/log",
                 {{"NODE_NAME", kNode},
                  {"KUBECONFIG", test::write_kubeconfig(dir_, server_url)},
                  {"DRIVER_MANAGER_SIM_ROOT", sim_root()},
                  {"VFIO_MANAGE_PATH", "/bin/true"},
                  {"POD_NAME", "\x01unset"},
                  {"HOSTNAME", "\x01unset"},
                  {"TERMINATION_MESSAGE_PATH", dir_ + "/termination-log"}}) {}

  void sigterm() const { process_.signal(SIGTERM); }
  [[nodiscard]] std::string log() const { return process_.log(); }

  // Waits for the Summary line, then for the process to exit: the exit code, and the seconds from the one
  // to the other as this test saw them (printed). The exit code is -1 when the process was still running
  // kExitBoundSeconds after its Summary line.
  int wait_for_summary_and_exit(const std::string& what) {
    const auto give_up = steady_clock::now() + kPatience;
    while (log().find("Summary: ") == std::string::npos) {
      if (!process_.running()) {
        ADD_FAILURE() << what << ": exited without a Summary line\n" << log();
        return process_.wait(0);
      }
      if (steady_clock::now() > give_up) {
        ADD_FAILURE() << what << ": no Summary line within " << kPatience.count() << " s\n" << log();
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const auto summary = steady_clock::now();
    const int code = process_.wait(kExitBoundSeconds);
    const double seconds = std::chrono::duration<double>(steady_clock::now() - summary).count();
    std::printf("%s: Summary -> exit %.3f s (exit code %d)\n", what.c_str(), seconds, code);
    return code;
  }

 private:
  static std::vector<std::string> argv(const std::vector<std::string>& args) {
    std::vector<std::string> v{test::bin_path("driver-manager")};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  }
  // A simulated host with nothing on it: no driver, no module, nothing of this machine read.
  std::string sim_root() const { return test::make_temp_dir("dm-run-end-host"); }

  std::string dir_;
  test::BackgroundProcess process_;
};

// Waits until `ready` holds (a case's precondition); fails the case when it never does.
void await(const std::function<bool()>& ready, const std::string& what) {
  const auto give_up = steady_clock::now() + kPatience;
  while (!ready()) {
    ASSERT_LT(steady_clock::now(), give_up) << "never happened: " << what;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The user's finding: the node GET is answered 404 after 3 s and the list of the node's pods is held (a
// server that is slow for some requests and never answers others). The run fails at once, and the pod
// watch's list, still waiting, ends with it.
TEST(RunEndProcessTest, AFatalAtTheStartEndsTheProcessThoughThePodListIsHeld) {
  test::StandInServer server([](const Request& r) -> std::optional<Answer> {
    if (is_node_get(r)) {
      return Answer{
          .status = 404,
          .body = test::StandInServer::status_body(404, "NotFound", "nodes \"gpu-node-1\" not found"),
          .delay = std::chrono::seconds(3)};
    }
    return std::nullopt;  // the pods list, and anything else
  });
  ProgramRun run({"uninstall_driver"}, server.url());

  const int code = run.wait_for_summary_and_exit("fatal at the start, pods list held");

  EXPECT_EQ(code, 1) << run.log();
  EXPECT_TRUE(server.received("GET /api/v1/pods?")) << "the pods list was never sent: the case shows nothing";
  EXPECT_THAT(run.log(), HasSubstr("not found: set NODE_NAME (--node-name)"));
  EXPECT_THAT(run.log(), HasSubstr("Summary: failed in"));
}

// The link goes silent with requests of the run in flight (the node read held, the pods list held): SIGTERM
// ends the run at once, 143 as documented, with the Summary saying so, well inside a pod's grace period.
TEST(RunEndProcessTest, SigtermWithTheLinkSilentExits143) {
  test::StandInServer server([](const Request&) -> std::optional<Answer> { return std::nullopt; });
  ProgramRun run({"uninstall_driver"}, server.url());
  await([&] { return server.received("GET /api/v1/nodes/") && server.received("GET /api/v1/pods?"); },
        "the node read and the pods list sent");
  const auto sent = steady_clock::now();
  run.sigterm();

  const int code = run.wait_for_summary_and_exit("SIGTERM, link silent");

  EXPECT_EQ(code, 143) << run.log();
  EXPECT_LT(steady_clock::now() - sent, std::chrono::seconds(30)) << "longer than a pod's grace period";
  EXPECT_THAT(run.log(), HasSubstr("Summary: terminated by SIGTERM"));
  EXPECT_THAT(run.log(), ::testing::Not(HasSubstr("level=fatal")));
}

// Further in: the node read and the pods listed, then everything held - the pod watch's stream, the access
// review the preflight waits for. SIGTERM ends it the same way, the watch and the review with it.
TEST(RunEndProcessTest, SigtermWhileThePreflightWaitsOnASilentLinkExits143) {
  test::StandInServer server([](const Request& r) -> std::optional<Answer> {
    if (is_node_get(r)) return Answer{.body = node_json()};
    if (is_pods_list(r)) return Answer{.body = empty_pod_list()};
    return std::nullopt;  // the watch, the access reviews, the own pod's lookup
  });
  ProgramRun run({"uninstall_driver"}, server.url());
  await([&] { return server.received("selfsubjectaccessreviews") && server.received("watch=1"); },
        "the access review and the pod watch sent");
  run.sigterm();

  const int code = run.wait_for_summary_and_exit("SIGTERM in the preflight, link silent");

  EXPECT_EQ(code, 143) << run.log();
  EXPECT_THAT(run.log(), HasSubstr("Summary: terminated by SIGTERM"));
}

// An address that accepts connections and never answers: nothing of the run ever gets a byte back. SIGTERM
// ends it (the user's other finding: the end waited for a fresh retry budget of the pod watch's list).
TEST(RunEndProcessTest, AnAddressThatAcceptsAndNeverAnswersEndsWithTheRun) {
  test::SilentListener listener;
  ProgramRun run({"uninstall_driver"}, listener.url());
  await([&] { return listener.accepted() >= 2; }, "the node read and the pods list connected");
  run.sigterm();

  const int code = run.wait_for_summary_and_exit("SIGTERM, address never answers");

  EXPECT_EQ(code, 143) << run.log();
  EXPECT_THAT(run.log(), HasSubstr("Summary: terminated by SIGTERM"));
}

// `plan` and `recover` against a silent link: SIGTERM ends them at once with 143 (they have no run to
// restore, and nothing of theirs outlives them).
TEST(RunEndProcessTest, PlanAndRecoverEndAtOnceOnSigtermWithTheLinkSilent) {
  for (const std::string command : {"plan", "recover"}) {
    test::StandInServer server([](const Request&) -> std::optional<Answer> { return std::nullopt; });
    const std::string dir = test::make_temp_dir("dm-run-end");
    test::BackgroundProcess p({test::bin_path("driver-manager"), command}, dir + "/log",
                              {{"NODE_NAME", kNode},
                               {"KUBECONFIG", test::write_kubeconfig(dir, server.url())},
                               {"DRIVER_MANAGER_SIM_ROOT", test::make_temp_dir("dm-run-end-host")},
                               {"VFIO_MANAGE_PATH", "/bin/true"}});
    await([&] { return server.received("GET /api/v1/nodes/"); }, command + ": the node read sent");
    const auto sent = steady_clock::now();
    p.signal(SIGTERM);
    const int code = p.wait(kExitBoundSeconds);
    std::printf("%s: SIGTERM -> exit %.3f s (exit code %d)\n", command.c_str(),
                std::chrono::duration<double>(steady_clock::now() - sent).count(), code);
    EXPECT_EQ(code, 143) << command << "\n" << p.log();
  }
}

}  // namespace
}  // namespace dm
