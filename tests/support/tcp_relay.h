// A TCP relay between a program under test and a server on 127.0.0.1, on which a test makes the network
// misbehave the way a link between a node and its API server does: latency, stalls (what a lost packet looks
// like to a TCP reader: the data comes late, after a retransmission), a partition (nothing passes either way
// and no connection is closed: every one is left half-open until the partition heals), and connections reset
// in the middle of whatever they carry (a watch, a chunked list). The bytes are relayed untouched (TLS passes
// through), so the program's kubeconfig only needs the relay's port in place of the server's. Given several
// servers it is the load balancer in front of them: each new connection goes to the next one that accepts
// it, as a TCP load balancer in front of API servers does.
//
// The machine's kernel has no netem qdisc, so the faults live here, in user space, per connection: one
// relay serves only the programs pointed at it, every other client of the server is untouched.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dm::test {

class TcpRelay {
 public:
  // Listens on 127.0.0.1 (an ephemeral port) and relays every connection to 127.0.0.1:`target_port`.
  explicit TcpRelay(int target_port) : TcpRelay(std::vector<int>{target_port}) {}
  // The same, spreading new connections over `target_ports` in turn (a server that refuses is skipped).
  explicit TcpRelay(std::vector<int> target_ports);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  [[nodiscard]] int port() const { return port_; }

  // Every chunk is passed on `latency` after it arrived, in both directions (the order kept).
  void set_latency(std::chrono::milliseconds latency) { latency_ms_ = latency.count(); }
  // A chunk is held `stall` longer with probability `chance` (0 to 1), and the chunks behind it with it.
  void set_stalls(double chance, std::chrono::milliseconds stall);
  // While on, nothing is passed on (what arrives is held, as the network would retransmit it later) and
  // no connection is closed: from both ends the peer is simply gone. New connections are accepted by the
  // kernel and then get no byte either.
  void set_partitioned(bool on) { partitioned_ = on; }
  // Resets (RST) every connection open now, both ends; returns how many.
  size_t reset_all();
  // Connections accepted so far.
  [[nodiscard]] size_t accepted() const { return accepted_; }

 private:
  struct Link;
  void accept_loop();
  void pump(const std::shared_ptr<Link>& link);

  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<int> target_ports_;
  size_t next_target_ = 0;  // the acceptor's only
  std::atomic<bool> stop_{false};
  std::atomic<long> latency_ms_{0};
  std::atomic<bool> partitioned_{false};
  std::atomic<size_t> accepted_{0};
  std::mutex mu_;  // guards what follows
  double stall_chance_ = 0;
  std::chrono::milliseconds stall_{0};
  std::vector<std::shared_ptr<Link>> links_;
  std::vector<std::thread> pumps_;
  std::thread acceptor_;
};

}  // namespace dm::test
