// OpenSSL's pieces the TLS layer is built from: error and certificate texts in words, the socket BIO
// (send with MSG_NOSIGNAL), PEM loading. Only kube/tls.cc and its tests include this.
#pragma once

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <string>

namespace dm::kube::tls_detail {

// The reason of OpenSSL's first queued error of this thread, in its own words ("" when none); the queue is
// emptied.
std::string take_openssl_error(int* reason = nullptr);
// The subjectAltName entries of a certificate, e.g. "DNS:localhost, IP:127.0.0.1" ("none" when it has none).
std::string alt_names(X509* cert);
std::string name_text(const X509_NAME* name);

// What the verification of one connection's server certificate found: filled in by OpenSSL's callback.
struct VerifyNotes {
  bool saw_server_certificate = false;
  long error = X509_V_OK;
  std::string alt_names;  // of the server's own certificate
  std::string issuer;     // of the certificate that failed
};

// Socket I/O for OpenSSL: send() with MSG_NOSIGNAL, so that a peer that went away is an error, not SIGPIPE.
struct SocketIo {
  int fd = -1;
  int last_errno = 0;  // of the socket call that failed
};

// The BIO method that reads and writes a SocketIo's socket.
const BIO_METHOD* socket_method();
// Adds every certificate of a PEM text to the trust store; false when it holds none.
bool add_pem_certificates(X509_STORE* store, const std::string& pem);
// A client certificate (and any intermediates after it) from PEM text.
bool use_pem_certificate(SSL_CTX* ctx, const std::string& pem);
bool use_pem_key(SSL_CTX* ctx, const std::string& pem);

}  // namespace dm::kube::tls_detail
