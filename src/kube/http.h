// One HTTP/1.1 connection to the API server (TLS: kube/tls, proxy: kube/proxy): server verification and
// client certificates from a Config, keep-alive with reconnect, and transfers that the caller can abort
// between polls (cancellation, watch deadlines). The bearer token comes with each request: it can change
// while a connection lives (token rotation).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "kube/config.h"

namespace dm::kube {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;                      // sent when non-empty (or when method is POST/PUT/PATCH)
  std::string content_type;              // of body
  std::string bearer_token;              // "" = none (never logged)
  std::chrono::milliseconds timeout{0};  // whole transfer; 0 = none
  // When set, 2xx response bodies are handed over piece by piece instead of being buffered (error bodies are
  // still buffered). Returning false aborts the transfer.
  std::function<bool(std::string_view)> on_body;
  // Called at least every poll_interval while the transfer runs; returning false aborts it.
  std::function<bool()> keep_going;
  std::chrono::milliseconds poll_interval{100};
};

struct HttpResponse {
  long status = 0;              // 0: no HTTP response at all
  std::string body;             // unless streamed through on_body
  std::string retry_after;      // Retry-After header, if any
  std::string transport_error;  // non-empty when the transfer failed (connect, TLS, timeout, reset, ...)
  bool aborted = false;         // keep_going or on_body asked to stop
  // Some byte of the request went out to the server: after a transport error, the server may have acted
  // on it (a write may have happened). False when the request never left (connect, TLS or proxy failure).
  bool request_sent = false;
};

class TlsContext;

// Not thread-safe: one transfer at a time (the client serialises access).
class HttpConnection {
 public:
  // The TLS settings of `config` (nullptr for a plain http:// server), to be shared by the connections of
  // one client: parsed once, and their sessions resumed across connections.
  static Result<std::shared_ptr<TlsContext>> tls_settings(const Config& config);
  static Result<std::unique_ptr<HttpConnection>> create(const std::string& user_agent,
                                                        std::shared_ptr<TlsContext> tls);
  // A connection with TLS settings of its own.
  static Result<std::unique_ptr<HttpConnection>> create(const Config& config, const std::string& user_agent);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Runs one transfer. An exception from on_body or keep_going aborts it and is rethrown here. A kept-alive
  // connection that the server closed while it was idle is replaced by a new one, and the request sent
  // again on it, only when that cannot do anything twice: nothing of the request was written yet, or it is
  // a read (GET, HEAD) and no byte of a response came back.
  HttpResponse perform(const HttpRequest& request);

  // The TLS settings the connection was created with (null for plain http://).
  [[nodiscard]] const std::shared_ptr<TlsContext>& tls_context() const;

  // Percent-encodes a query parameter value.
  static std::string escape(std::string_view s);

  // Where a new connection comes from instead of a TCP connect to the URL's host and port: a connected
  // stream socket (the connection takes it over and makes it non-blocking) or why there is none. Proxy and
  // TLS go over it as over a TCP socket. The product never sets one; tests and the fuzz targets hand the
  // client one end of a socket pair that already holds the server's answer.
  using Dialer = std::function<Result<int>(const std::string& host, const std::string& port)>;
  void set_dialer(Dialer dialer);

 private:
  HttpConnection();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dm::kube
