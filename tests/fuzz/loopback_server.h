// A plain-HTTP server on a loopback port for the HTTP fuzz targets: every connection gets the bytes set by
// respond() as the answer to its first request, after which the server closes its sending side. The client
// under test is the project's own (kube/http.h) talking to http://127.0.0.1:<port>.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "kube/http.h"

namespace dm::fuzz {

class LoopbackServer {
 public:
  LoopbackServer();
  ~LoopbackServer();
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  // Sends `response` to the next request (and to every later one, until changed), then closes for writing.
  void respond(std::string_view response);
  [[nodiscard]] std::string url() const;

  // One request with a connection of its own. With `streamed`, a 2xx body is streamed into it piece by
  // piece (as list and watch bodies are) instead of being buffered.
  kube::HttpResponse perform(kube::HttpRequest request, std::string* streamed = nullptr);

 private:
  void run();
  void serve(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::string response_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The one server of a target process.
LoopbackServer& loopback_server();

}  // namespace dm::fuzz
