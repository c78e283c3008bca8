// A stand-in API server for tests that run the real program against a server in trouble: plain HTTP/1.1 on
// 127.0.0.1 (a kubeconfig's server http://127.0.0.1:<port>, see write_kubeconfig), each connection on a
// thread of its own. The test's route answers each request (a status and a JSON body, after a delay) or
// holds it: no byte of an answer comes back, ever - a request stuck behind a slow or throttled server, or
// a link gone silent - until the client closes the connection or the server is destroyed. Beside it, a
// listener that accepts connections and never reads or answers anything (SilentListener).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dm::test {

class StandInServer {
 public:
  struct Request {
    std::string method;
    std::string target;  // path and query, as sent
    std::string body;
  };
  struct Answer {
    int status = 200;
    std::string body = "{}";
    std::chrono::milliseconds delay{0};  // before the answer
  };
  // The answer to a request; nullopt: hold it.
  using Route = std::function<std::optional<Answer>(const Request&)>;

  explicit StandInServer(Route route);
  ~StandInServer();
  StandInServer(const StandInServer&) = delete;
  StandInServer& operator=(const StandInServer&) = delete;

  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // From now on every request is held, whatever the route says (the link went silent).
  void go_silent() { silent_ = true; }
  // "<METHOD> <target>" of every request received, in order.
  [[nodiscard]] std::vector<std::string> requests() const;
  // Whether a request whose "<METHOD> <target>" contains `part` has arrived.
  [[nodiscard]] bool received(const std::string& part) const;
  // Requests held whose connection the client has not closed yet.
  [[nodiscard]] int held_now() const { return held_now_.load(); }

  // A Status body as the API server sends it with `code`.
  static std::string status_body(int code, const std::string& reason, const std::string& message);

 private:
  void accept_loop();
  void serve(int fd);
  // Waits until the client closes `fd` or the server stops.
  void hold(int fd);

  Route route_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> silent_{false};
  std::atomic<int> held_now_{0};
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::vector<std::thread> connections_;  // guarded by mu_
  std::thread acceptor_;
};

// A listener on 127.0.0.1 that accepts every connection and never reads from it or writes to it: an address
// that takes connections and never answers.
class SilentListener {
 public:
  SilentListener();
  ~SilentListener();
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] int accepted() const { return accepted_.load(); }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<int> fds_;  // the acceptor's own
  std::thread acceptor_;
};

// Writes a kubeconfig for `server_url` (a bearer token, no TLS for http://) to `dir`/kubeconfig; returns its
// path.
std::string write_kubeconfig(const std::string& dir, const std::string& server_url);

}  // namespace dm::test
