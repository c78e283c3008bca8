// scripts/cluster starts a stopped control-plane component again only once the old process has let go of
// its files, its listening port among them: started earlier, the new one fails with "address already in use".
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "support/process.h"

namespace dm::test {
namespace {

// The state letter of /proc/PID/stat ('?' when there is no such process).
char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = stat.rfind(") ");
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

bool accepts_connections(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

int cluster_gone(pid_t pid) {
  return run_command({source_path("scripts/cluster"), "_gone", std::to_string(pid)}).exit_code;
}

// The child: listens on an ephemeral port, reports it, and leaves a second thread holding the socket (until
// `release` is closed) while its main thread exits, as a Go program's main thread may be a zombie while
// another thread still closes the shared file table.
[[noreturn]] void listen_then_exit_main_thread(int report, int release) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 4) != 0)
    _exit(2);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  if (write(report, &port, sizeof port) != sizeof port) _exit(2);
  close(report);
  static int release_fd = release;
  pthread_t holder{};
  pthread_create(
      &holder, nullptr,
      [](void*) -> void* {
        char c = 0;
        while (read(release_fd, &c, 1) > 0) {
        }
        return nullptr;
      },
      nullptr);
  // The exit of this thread alone (not pthread_exit, which unwinds through the test framework's frames).
  syscall(SYS_exit, 0);
  _exit(3);
}

TEST(ClusterScriptTest, AProcessWhoseMainThreadExitedIsNotGoneWhileAnotherThreadStillHoldsItsPort) {
  int report[2];
  int release[2];
  ASSERT_EQ(pipe(report), 0);
  ASSERT_EQ(pipe(release), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(report[0]);
    close(release[1]);
    listen_then_exit_main_thread(report[1], release[0]);
  }
  close(report[1]);
  close(release[0]);
  int port = 0;
  ASSERT_EQ(read(report[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  close(report[0]);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (process_state(child) != 'Z' && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(process_state(child), 'Z') << "the child's main thread did not exit";
  EXPECT_TRUE(accepts_connections(port)) << "the second thread should still hold the listening socket";
  EXPECT_EQ(cluster_gone(child), 1) << "a zombie main thread with a live thread is not gone yet";

  close(release[1]);  // the holder returns; the process exits and closes its files
  int gone = 1;
  while ((gone = cluster_gone(child)) != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(gone, 0) << "the process exited with its files closed";
  EXPECT_FALSE(accepts_connections(port)) << "once gone, the port is free for the next start";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(cluster_gone(child), 0) << "a reaped process is gone";
}

// A registry of ports for scripts/cluster in a directory of its own, with clusters that are up (their state
// directory has its certificates) and one that is down.
struct PortRegistry {
  std::string dir = make_temp_dir("dm-ports");
  std::string lock = dir + "/ports.lock";
  std::string up = dir + "/up";
  std::string down = dir + "/down";
  std::string fresh = dir + "/fresh";
  PortRegistry() {
    for (const auto& d : {up, fresh}) std::filesystem::create_directories(d + "/pki");
    std::filesystem::create_directories(down);
  }
  ~PortRegistry() { std::filesystem::remove_all(dir); }
  PortRegistry(const PortRegistry&) = delete;
  PortRegistry& operator=(const PortRegistry&) = delete;
  [[nodiscard]] std::string owned() const { return read_file(lock + ".owned"); }
  // Ports 19990-19993: below those clusters pick by default (20000 on) and the kernel's ephemeral ones.
  [[nodiscard]] CommandOutput pick() const {
    return run_command({source_path("scripts/cluster"), "_pick-port", fresh}, "",
                       {{"K8S_PORT_LOCK", lock}, {"K8S_PORT_RANGE", "19990 19994"}});
  }
};

TEST(ClusterScriptTest, APortOfAClusterThatIsUpIsNotPickedAgainThoughNothingListensOnIt) {
  const PortRegistry r;
  write_file(r.lock + ".owned", "19990 " + r.up + "\n19991 " + r.up + "\n19992 " + r.up + "\n");
  const CommandOutput out = r.pick();
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.out, "19993\n") << "the one port no cluster that is up has picked";
  EXPECT_NE(r.owned().find("19993 " + r.fresh + "\n"), std::string::npos)
      << "the port is noted as the new cluster's: " << r.owned();
}

TEST(ClusterScriptTest, ThePortsOfAClusterThatIsDownAreForgottenAndFreeToPick) {
  const PortRegistry r;
  write_file(r.lock + ".owned",
             "19990 " + r.down + "\n19991 " + r.up + "\n19992 " + r.up + "\n19993 " + r.up + "\n");
  const CommandOutput out = r.pick();
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.out, "19990\n") << "the port of the cluster that is down";
  EXPECT_EQ(r.owned(), "19991 " + r.up + "\n19992 " + r.up + "\n19993 " + r.up + "\n19990 " + r.fresh + "\n");
}

TEST(ClusterScriptTest, WhenEveryPortIsTakenThePickFailsSayingSo) {
  const PortRegistry r;
  std::string lines;
  for (int port = 19990; port < 19994; ++port) lines += std::to_string(port) + " " + r.up + "\n";
  write_file(r.lock + ".owned", lines);
  const CommandOutput out = r.pick();
  EXPECT_NE(out.exit_code, 0);
  EXPECT_NE(out.err.find("could not find a free port"), std::string::npos) << out.err;
  EXPECT_EQ(r.owned(), lines) << "nothing noted";
}

}  // namespace
}  // namespace dm::test
