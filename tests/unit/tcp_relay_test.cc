// The test relay's faults do what the fault sweep counts on: bytes pass untouched, latency holds each chunk
// back, a partition passes nothing and closes nothing until it heals, a reset reaches both ends.
#include "support/tcp_relay.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

namespace dm::test {
namespace {

using namespace std::chrono_literals;

// An echo server on 127.0.0.1 for one connection at a time.
class Echo {
 public:
  Echo() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 8), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        ++accepted_;
        char buf[4096];
        for (ssize_t n; (n = recv(c, buf, sizeof buf, 0)) > 0;) (void)send(c, buf, static_cast<size_t>(n), 0);
        close(c);
      }
    });
  }
  ~Echo() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  Echo(const Echo&) = delete;
  Echo& operator=(const Echo&) = delete;
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] int accepted() const { return accepted_; }

 private:
  std::atomic<int> accepted_{0};
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

int dial(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

// What arrives on `fd` within `within` (the whole of `want_size` bytes, or less if the time runs out).
std::string read_for(int fd, size_t want_size, std::chrono::milliseconds within) {
  std::string got;
  const auto until = std::chrono::steady_clock::now() + within;
  while (got.size() < want_size) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left <= 0ms) break;
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

TEST(TcpRelayTest, PassesTheBytesBothWaysUntouched) {
  const Echo echo;
  TcpRelay relay(echo.port());
  const int fd = dial(relay.port());
  const std::string msg(100000, 'x');
  std::thread writer([&] { (void)send(fd, msg.data(), msg.size(), MSG_NOSIGNAL); });
  EXPECT_EQ(read_for(fd, msg.size(), 30s), msg);
  writer.join();
  EXPECT_EQ(relay.accepted(), 1U);
  close(fd);
}

TEST(TcpRelayTest, LatencyHoldsEachChunkBackInBothDirections) {
  const Echo echo;
  TcpRelay relay(echo.port());
  relay.set_latency(300ms);
  const int fd = dial(relay.port());
  const auto sent = std::chrono::steady_clock::now();
  ASSERT_EQ(send(fd, "ping", 4, MSG_NOSIGNAL), 4);
  EXPECT_EQ(read_for(fd, 4, 30s), "ping");
  // Out and back: the relay held it at least 300 ms each way (a lower bound: never early).
  EXPECT_GE(std::chrono::steady_clock::now() - sent, 600ms);
  close(fd);
}

TEST(TcpRelayTest, APartitionPassesNothingAndClosesNothingUntilItHeals) {
  const Echo echo;
  TcpRelay relay(echo.port());
  const int fd = dial(relay.port());
  relay.set_partitioned(true);
  ASSERT_EQ(send(fd, "held", 4, MSG_NOSIGNAL), 4);
  EXPECT_EQ(read_for(fd, 4, 500ms), "") << "nothing passes, and the connection is not closed either";
  relay.set_partitioned(false);
  EXPECT_EQ(read_for(fd, 4, 30s), "held") << "what was sent during the partition arrives once it heals";
  close(fd);
}

// A port nobody listens on: a connection to it is refused.
int refusing_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(TcpRelayTest, SpreadsConnectionsOverItsServersInTurnAndSkipsOneThatRefuses) {
  const Echo a;
  const Echo b;
  {
    TcpRelay relay({a.port(), b.port()});
    for (const char* msg : {"1", "2", "3", "4"}) {
      const int fd = dial(relay.port());
      ASSERT_EQ(send(fd, msg, 1, MSG_NOSIGNAL), 1);
      EXPECT_EQ(read_for(fd, 1, 30s), msg);
      close(fd);
    }
  }
  EXPECT_EQ(a.accepted(), 2);
  EXPECT_EQ(b.accepted(), 2);
  TcpRelay relay({refusing_port(), a.port()});
  for (int i = 0; i < 2; ++i) {
    const int fd = dial(relay.port());
    ASSERT_EQ(send(fd, "x", 1, MSG_NOSIGNAL), 1);
    EXPECT_EQ(read_for(fd, 1, 30s), "x") << "the refusing server is skipped";
    close(fd);
  }
  EXPECT_EQ(a.accepted(), 4);
}

TEST(TcpRelayTest, AResetReachesTheProgramAsConnectionReset) {
  const Echo echo;
  TcpRelay relay(echo.port());
  const int fd = dial(relay.port());
  ASSERT_EQ(send(fd, "a", 1, MSG_NOSIGNAL), 1);
  ASSERT_EQ(read_for(fd, 1, 30s), "a");
  EXPECT_EQ(relay.reset_all(), 1U);
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  ASSERT_EQ(poll(&p, 1, 30000), 1);
  char c = 0;
  EXPECT_EQ(recv(fd, &c, 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  close(fd);
}

}  // namespace
}  // namespace dm::test
