// TLS client sessions over the system's OpenSSL on a connected non-blocking socket: what the peer must prove
// (the CA of the Config, its name or IP address) and what we present (client certificate and key).
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "kube/config.h"

namespace dm::kube {

// Trust anchors, client credentials and protocol settings from a Config, parsed once and shared by every
// connection of a client (from any thread). It also keeps the last session a server granted, so that the
// next connection resumes it with an abbreviated handshake instead of a full one: no certificate checks
// and no key exchange on either side, which on a busy node costs tens of milliseconds per connection.
//
// Protocol: TLS 1.2 or 1.3 (1.3 preferred); on 1.2 only ECDHE key exchange with AEAD ciphers; key exchange
// groups X25519, P-256 and P-384. The server's certificate must chain to the Config's CA (or the system's
// CA bundle when it names none) and list the host name or IP address in its subjectAltName; the subject's
// common name is never taken for a name.
class TlsContext {
 public:
  static Result<std::unique_ptr<TlsContext>> create(const Config& config);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

 private:
  TlsContext();
  friend class TlsSession;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TlsSession {
 public:
  // Returned by handshake/read/write besides byte counts: wait for the socket, then call again.
  static constexpr int kWantRead = -1;
  static constexpr int kWantWrite = -2;
  static constexpr int kFailed = -3;  // error() says why

  // `fd` stays owned by the caller and must outlive the session; `host` is the name or IP literal of the
  // URL, which the server's certificate must be valid for (unless the Config names a tls-server-name).
  static Result<std::unique_ptr<TlsSession>> create(const TlsContext& context, int fd,
                                                    const std::string& host);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  int handshake();  // 0 when done
  // Whether the completed handshake resumed an earlier session of the context (the server's certificate
  // was checked when that session was established, not again).
  [[nodiscard]] bool resumed() const;
  int read(char* buf, size_t len);         // bytes (> 0), 0 when the peer closed
  int write(const char* buf, size_t len);  // bytes (> 0)
  [[nodiscard]] const std::string& error() const { return error_; }
  // The negotiated protocol and cipher suite, e.g. "TLSv1.3 TLS_AES_128_GCM_SHA256".
  [[nodiscard]] std::string describe() const;

 private:
  TlsSession();
  int fail(const std::string& what);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

}  // namespace dm::kube
