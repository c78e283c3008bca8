// The server side of the HTTP fuzz targets, without a server: each connection the client under test opens
// (kube/http.h, asked for http://127.0.0.1:<port>) is one end of a socket pair whose other end already holds
// the bytes set by respond() and is shut for writing, so the answer ends where those bytes end. All in the
// fuzzing thread: no port, no accept, no second thread to wake for every input.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kube/http.h"

namespace dm::fuzz {

class CannedServer {
 public:
  // The longest answer a connection can hold (the socket pair's buffer); longer inputs are skipped.
  static constexpr size_t kMaxResponse = size_t{128} * 1024;

  // Sends `response` on every later connection, until changed. False when it is longer than kMaxResponse.
  [[nodiscard]] bool respond(std::string_view response);

  // One request on a connection of its own. With `streamed`, a 2xx body is streamed into it piece by piece
  // (as list and watch bodies are) instead of being buffered.
  kube::HttpResponse perform(kube::HttpRequest request, std::string* streamed = nullptr);

 private:
  Result<int> dial();

  std::string response_;
  std::vector<int> peers_;  // the server ends of this request's connections, closed after it
};

// The one server of a target process.
CannedServer& canned_server();

}  // namespace dm::fuzz
