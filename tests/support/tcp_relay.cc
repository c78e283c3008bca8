#include "support/tcp_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

namespace dm::test {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kTick = std::chrono::milliseconds(10);  // how often a pump looks at its flags

int listen_loopback(int& port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("relay socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    close(fd);
    throw std::runtime_error(std::string("relay listen: ") + std::strerror(e));
  }
  port = ntohs(a.sin_port);
  return fd;
}

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void set_nonblocking(int fd) {
  (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// Closing with a zero linger time sends RST instead of FIN.
void close_with_reset(int fd) {
  const linger l{.l_onoff = 1, .l_linger = 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(fd);
}

struct Chunk {
  Clock::time_point due;
  std::string data;
  size_t off = 0;
};

// The bytes read from one end, waiting to be written to the other.
struct Direction {
  std::deque<Chunk> queue;
  bool eof = false;   // the reading end closed its side
  bool shut = false;  // ... and that was passed on (shutdown of the writing end)
};

}  // namespace

struct TcpRelay::Link {
  int fd[2] = {-1, -1};  // 0: the program's end, 1: the server's end
  Direction dir[2];      // dir[i]: read from fd[i], written to fd[1 - i]
  std::atomic<bool> reset{false};
  std::atomic<bool> done{false};
};

TcpRelay::TcpRelay(std::vector<int> target_ports) : target_ports_(std::move(target_ports)) {
  listen_fd_ = listen_loopback(port_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpRelay::~TcpRelay() {
  stop_ = true;
  acceptor_.join();
  for (auto& t : pumps_) t.join();
  close(listen_fd_);
}

void TcpRelay::set_stalls(double chance, std::chrono::milliseconds stall) {
  const std::lock_guard lock(mu_);
  stall_chance_ = chance;
  stall_ = stall;
}

size_t TcpRelay::reset_all() {
  const std::lock_guard lock(mu_);
  size_t n = 0;
  for (auto& l : links_) {
    if (l->done) continue;
    l->reset = true;
    ++n;
  }
  return n;
}

void TcpRelay::accept_loop() {
  while (!stop_) {
    pollfd p{.fd = listen_fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, static_cast<int>(kTick.count())) <= 0) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    int server = -1;
    for (size_t tried = 0; tried < target_ports_.size() && server < 0; ++tried) {
      server = connect_loopback(target_ports_[next_target_]);
      next_target_ = (next_target_ + 1) % target_ports_.size();
    }
    if (server < 0) {  // every server is down: the program sees its connection refused, as it would
      close_with_reset(client);
      continue;
    }
    set_nonblocking(client);
    set_nonblocking(server);
    auto link = std::make_shared<Link>();
    link->fd[0] = client;
    link->fd[1] = server;
    ++accepted_;
    const std::lock_guard lock(mu_);
    links_.push_back(link);
    pumps_.emplace_back([this, link] { pump(link); });
  }
}

void TcpRelay::pump(const std::shared_ptr<Link>& link) {
  std::mt19937 random(static_cast<unsigned>(link->fd[0] * 7919 + link->fd[1]));
  std::uniform_real_distribution<double> unit(0, 1);
  bool failed = false;
  char buf[65536];
  while (!stop_ && !link->reset && !failed) {
    const auto now = Clock::now();
    const bool partitioned = partitioned_;
    bool want_out[2] = {false, false};
    auto next_due = now + kTick;
    for (int i = 0; i < 2 && !failed; ++i) {
      Direction& d = link->dir[i];
      const int out = link->fd[1 - i];
      while (!partitioned && !d.queue.empty() && d.queue.front().due <= now) {
        Chunk& c = d.queue.front();
        const ssize_t n = send(out, c.data.data() + c.off, c.data.size() - c.off, MSG_NOSIGNAL);
        if (n < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK) {
            want_out[1 - i] = true;
          } else {
            failed = true;
          }
          break;
        }
        c.off += static_cast<size_t>(n);
        if (c.off == c.data.size()) d.queue.pop_front();
      }
      // While partitioned nothing is due: what is held waits for the next tick (a chunk already due would
      // otherwise wake the pump at once, every millisecond, for the whole partition).
      if (!partitioned && !d.queue.empty()) next_due = std::min(next_due, d.queue.front().due);
      if (d.eof && d.queue.empty() && !d.shut) {
        (void)shutdown(out, SHUT_WR);
        d.shut = true;
      }
    }
    if (failed || (link->dir[0].shut && link->dir[1].shut)) break;
    pollfd p[2];
    for (int j = 0; j < 2; ++j) {
      const auto events = static_cast<short>((link->dir[j].eof ? 0 : POLLIN) | (want_out[j] ? POLLOUT : 0));
      // An end with nothing to wait for is left out: poll reports a closed socket's POLLHUP whatever the
      // events asked, and the pump would spin on it.
      p[j] = {.fd = events == 0 ? -1 : link->fd[j], .events = events, .revents = 0};
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_due - now);
    (void)poll(p, 2, static_cast<int>(std::clamp<long>(wait.count(), 1, kTick.count())));
    for (int j = 0; j < 2 && !failed; ++j) {
      if (link->dir[j].eof || (p[j].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = recv(link->fd[j], buf, sizeof buf, 0);
      if (n > 0) {
        Direction& d = link->dir[j];
        auto due = Clock::now() + std::chrono::milliseconds(latency_ms_.load());
        {
          const std::lock_guard lock(mu_);
          if (stall_chance_ > 0 && unit(random) < stall_chance_) due += stall_;
        }
        if (!d.queue.empty()) due = std::max(due, d.queue.back().due);  // the order is kept
        d.queue.push_back({.due = due, .data = std::string(buf, static_cast<size_t>(n))});
      } else if (n == 0) {
        link->dir[j].eof = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        failed = true;  // a reset from one end is passed on to the other
      }
    }
  }
  if (link->reset || failed) {
    close_with_reset(link->fd[0]);
    close_with_reset(link->fd[1]);
  } else {
    close(link->fd[0]);
    close(link->fd[1]);
  }
  link->done = true;
}

}  // namespace dm::test
