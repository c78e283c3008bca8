#include "kube/tls.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "kube/tls_openssl.h"

namespace dm::kube {
namespace {

using tls_detail::add_pem_certificates;
using tls_detail::alt_names;
using tls_detail::name_text;
using tls_detail::socket_method;
using tls_detail::SocketIo;
using tls_detail::take_openssl_error;
using tls_detail::use_pem_certificate;
using tls_detail::use_pem_key;
using tls_detail::VerifyNotes;

// The system's CA bundle: used only when the Config names no CA (a public server certificate).
constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";
// TLS 1.2: ECDHE key exchange with AEAD ciphers only (TLS 1.3 has nothing else). The API server (Go) offers
// all of them by default.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// Key exchange groups, cheapest first: the server takes the first of the client's list it supports.
constexpr const char* kGroups = "X25519:P-256:P-384";
constexpr const char* kWhatThisClientSpeaks =
    "this client speaks TLS 1.2 and 1.3; on TLS 1.2 it accepts only ECDHE key exchange with AES-GCM or "
    "ChaCha20-Poly1305, and the key exchange groups X25519, P-256 and P-384";

}  // namespace

struct TlsContext::Impl {
  SSL_CTX* ctx = nullptr;
  bool verify = true;
  std::string ca_source;    // which CA the server's certificate must chain to, for messages
  std::string server_name;  // tls-server-name: checked (and sent) instead of the URL's host
  bool has_client_certificate = false;

  // The session the last full or resumed handshake established, offered by the next connection.
  std::mutex session_mu;
  std::condition_variable session_cv;
  SSL_SESSION* session = nullptr;
  // A full handshake is under way: connections opened beside it (the first requests of a run go out
  // together) wait for its session and resume it instead of each paying for a key exchange and the
  // certificate checks, at most this long.
  bool full_handshake_running = false;
  static constexpr std::chrono::milliseconds kAwaitFirstSession{1000};

  Impl() = default;
  ~Impl() {
    SSL_SESSION_free(session);
    SSL_CTX_free(ctx);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Offers the remembered session, if any, to a connection about to shake hands; with none yet and another
  // connection's full handshake under way, waits for its session first. Returns whether this connection
  // shakes hands in full (it then calls full_handshake_over() when done, whatever the outcome).
  bool offer_session(SSL* ssl) {
    std::unique_lock lock(session_mu);
    if (session == nullptr && full_handshake_running) {
      session_cv.wait_for(lock, kAwaitFirstSession,
                          [this] { return session != nullptr || !full_handshake_running; });
    }
    if (session != nullptr) {
      // Each connection offers a copy: OpenSSL treats a TLS 1.3 ticket as used once a connection that
      // resumed it receives a new one, and marks the session it holds unresumable, which would make every
      // connection still about to offer the shared one shake hands in full.
      SSL_SESSION* copy = SSL_SESSION_dup(session);
      const bool offered = copy != nullptr && SSL_set_session(ssl, copy) == 1;
      SSL_SESSION_free(copy);  // the connection holds its own reference
      if (offered) return false;
    }
    full_handshake_running = true;
    return true;
  }
  void full_handshake_over() {
    {
      const std::lock_guard lock(session_mu);
      full_handshake_running = false;
    }
    session_cv.notify_all();
  }
  // OpenSSL hands over each session a server grants (TLS 1.2: during the handshake; TLS 1.3: as a ticket
  // after it, read with the first response): the newest is offered by the next connection.
  static int remember_session(SSL* ssl, SSL_SESSION* fresh) {
    auto* self = static_cast<Impl*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
    {
      const std::lock_guard lock(self->session_mu);
      SSL_SESSION_free(self->session);
      self->session = fresh;
    }
    self->session_cv.notify_all();
    return 1;  // the reference is ours
  }
};

TlsContext::TlsContext() : impl_(std::make_unique<Impl>()) {}
TlsContext::~TlsContext() = default;

Result<std::unique_ptr<TlsContext>> TlsContext::create(const Config& config) {
  std::unique_ptr<TlsContext> tls(new TlsContext());
  Impl& im = *tls->impl_;
  const std::string what = "TLS setup for " + config.source;
  auto failed = [&](const std::string& field) {
    return Error(what + ": cannot use " + field + ": " + take_openssl_error());
  };
  ERR_clear_error();
  im.ctx = SSL_CTX_new(TLS_client_method());
  if (im.ctx == nullptr) return failed("OpenSSL");
  SSL_CTX* ctx = im.ctx;
  SSL_CTX_set_app_data(ctx, &im);
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1 || SSL_CTX_set1_groups_list(ctx, kGroups) != 1) {
    return failed("the TLS protocol settings");
  }
  // The end of the connection without close_notify is the end of the data: HTTP's own framing tells
  // whether a response was complete.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
  // A write may return after part of the data, and be retried with the rest from another address.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, &Impl::remember_session);

  const bool has_ca = !config.ca_data.empty() || !config.ca_file.empty();
  if (config.insecure_skip_tls_verify && has_ca) {
    return Error(what +
                 ": insecure-skip-tls-verify and a certificate authority together: with a CA, leave "
                 "insecure-skip-tls-verify unset");
  }
  im.verify = !config.insecure_skip_tls_verify;
  im.server_name = config.tls_server_name;
  if (!config.ca_data.empty()) {
    im.ca_source = "the certificate-authority-data of " + config.source;
    if (!add_pem_certificates(SSL_CTX_get_cert_store(ctx), config.ca_data))
      return Error(what + ": cannot use certificate-authority-data: it holds no PEM certificate");
  } else if (!config.ca_file.empty()) {
    im.ca_source = "the certificate-authority " + config.ca_file;
    if (SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1)
      return failed("certificate-authority " + config.ca_file);
  } else if (im.verify) {
    im.ca_source = std::string("the system's CA bundle ") + kSystemCaBundle;
    if (SSL_CTX_load_verify_locations(ctx, kSystemCaBundle, nullptr) != 1)
      return failed(std::string("CA bundle ") + kSystemCaBundle);
  }
  if (!im.verify) {
    spdlog::warn(
        "{}: insecure-skip-tls-verify is set: the API server's certificate is not checked, so anyone on the "
        "network path can pose as the API server",
        config.source);
  }

  const bool has_cert = !config.client_cert_data.empty() || !config.client_cert_file.empty();
  const bool has_key = !config.client_key_data.empty() || !config.client_key_file.empty();
  if (has_cert != has_key)
    return Error(what + ": a client certificate needs its key and a key its certificate");
  if (!config.client_cert_data.empty()) {
    if (!use_pem_certificate(ctx, config.client_cert_data)) return failed("client-certificate-data");
  } else if (!config.client_cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, config.client_cert_file.c_str()) != 1)
      return failed("client-certificate " + config.client_cert_file);
  }
  if (!config.client_key_data.empty()) {
    if (!use_pem_key(ctx, config.client_key_data)) return failed("client-key-data");
  } else if (!config.client_key_file.empty()) {
    if (SSL_CTX_use_PrivateKey_file(ctx, config.client_key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return failed("client-key " + config.client_key_file);
  }
  if (has_cert && SSL_CTX_check_private_key(ctx) != 1) return failed("the client key with its certificate");
  im.has_client_certificate = has_cert;
  return tls;
}

struct TlsSession::Impl {
  SSL* ssl = nullptr;
  TlsContext::Impl* context = nullptr;  // outlives the session (the connection holds both)
  SocketIo io;
  VerifyNotes notes;
  std::string host;  // of the URL
  std::string name;  // the certificate must be valid for: the host, or the Config's tls-server-name
  bool full_handshake = false;  // offered no session: the context's other connections may wait for ours

  Impl() = default;
  ~Impl() {
    handshake_over();
    // Ends the connection with close_notify (if the socket takes it now): OpenSSL keeps the session of a
    // connection that ended so resumable, not of one that was dropped.
    if (ssl != nullptr && SSL_is_init_finished(ssl) == 1) (void)SSL_shutdown(ssl);
    ERR_clear_error();
    SSL_free(ssl);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void handshake_over() {
    if (full_handshake && context != nullptr) context->full_handshake_over();
    full_handshake = false;
  }

  // Called by OpenSSL for each certificate of the server's chain; the verdict stays OpenSSL's own.
  static int on_verify(int ok, X509_STORE_CTX* store) {
    auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
    auto* self = static_cast<Impl*>(SSL_get_app_data(ssl));
    self->notes.saw_server_certificate = true;
    if (ok == 0 && self->notes.error == X509_V_OK) {
      self->notes.error = X509_STORE_CTX_get_error(store);
      if (X509* leaf = X509_STORE_CTX_get0_cert(store)) self->notes.alt_names = alt_names(leaf);
      if (X509* bad = X509_STORE_CTX_get_current_cert(store))
        self->notes.issuer = name_text(X509_get_issuer_name(bad));
    }
    return ok;
  }

  // Why the server's certificate was not accepted, in a cluster operator's words.
  [[nodiscard]] std::string untrusted_certificate() const {
    const std::string head = "the certificate of the API server at " + host;
    switch (notes.error) {
      case X509_V_ERR_HOSTNAME_MISMATCH:
        return head + " is not valid for the name " + name + " (it lists " + notes.alt_names + ")";
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return head + " is not valid for the IP address " + name + " (it lists " + notes.alt_names + ")";
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        return head + " is not trusted: it was issued by " + notes.issuer + ", which is not a CA of " +
               context->ca_source;
      case X509_V_ERR_CERT_HAS_EXPIRED:
        return head + " has expired";
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return head + " is not valid yet (is this node's clock right?)";
      default:
        return head + " is not trusted: " + X509_verify_cert_error_string(notes.error);
    }
  }

  // A handshake (or, with TLS 1.3, the first read's) failure in a cluster operator's words.
  std::string explain(const std::string& reason_text, int reason) const {
    const std::string server = "the API server at " + host;
    switch (reason) {
      case SSL_R_CERTIFICATE_VERIFY_FAILED:
        return untrusted_certificate();
      case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      case SSL_R_UNSUPPORTED_PROTOCOL:
        return server + " offers no TLS version this client supports (" + kWhatThisClientSpeaks + ")";
      case SSL_R_WRONG_VERSION_NUMBER:
      case SSL_R_PACKET_LENGTH_TOO_LONG:
        return server + " did not answer in TLS (is it a plain http:// server, or not an API server?)";
      case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
      case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
      case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
      case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
      case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
      case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
        return client_certificate_refused(server, reason_text);
      case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
      case SSL_R_NO_SHARED_CIPHER:
      case SSL_R_NO_CIPHERS_AVAILABLE:
      case SSL_R_WRONG_CIPHER_RETURNED:
      case SSL_R_WRONG_CURVE:
        // After the server's certificate, only the client's is left to refuse.
        if (notes.saw_server_certificate) return client_certificate_refused(server, reason_text);
        return server + " and this client have no cipher suite or key exchange group in common (" +
               kWhatThisClientSpeaks + ")";
      default:
        return "TLS with " + server + " failed: " + reason_text;
    }
  }
  [[nodiscard]] std::string client_certificate_refused(const std::string& server,
                                                       const std::string& reason_text) const {
    if (!context->has_client_certificate)
      return server + " requires a client certificate, and the kubeconfig gives none (" + reason_text + ")";
    return server + " refused this client's certificate (" + reason_text +
           "): is it signed by a CA the API server trusts for clients, and still valid?";
  }
};

TlsSession::TlsSession() : impl_(std::make_unique<Impl>()) {}
TlsSession::~TlsSession() = default;

Result<std::unique_ptr<TlsSession>> TlsSession::create(const TlsContext& context, int fd,
                                                       const std::string& host) {
  std::unique_ptr<TlsSession> s(new TlsSession());
  Impl& im = *s->impl_;
  im.io.fd = fd;
  im.host = host;
  im.context = context.impl_.get();
  im.name = im.context->server_name.empty() ? host : im.context->server_name;
  ERR_clear_error();
  im.ssl = SSL_new(im.context->ctx);
  BIO* bio = im.ssl != nullptr ? BIO_new(socket_method()) : nullptr;
  if (bio == nullptr) return Error("TLS session for " + host + ": " + take_openssl_error());
  BIO_set_data(bio, &im.io);
  BIO_set_init(bio, 1);
  SSL_set_bio(im.ssl, bio, bio);
  SSL_set_app_data(im.ssl, &im);
  std::array<unsigned char, 16> ip{};
  const bool is_ip = inet_pton(AF_INET, im.name.c_str(), ip.data()) == 1 ||
                     inet_pton(AF_INET6, im.name.c_str(), ip.data()) == 1;
  bool ok = true;
  if (im.context->verify) {
    SSL_set_verify(im.ssl, SSL_VERIFY_PEER, &Impl::on_verify);
    // The name only from the subjectAltName, never from the subject's common name; "*" only as a whole
    // leftmost label.
    SSL_set_hostflags(im.ssl, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(im.ssl), im.name.c_str()) == 1
               : SSL_set1_host(im.ssl, im.name.c_str()) == 1;
  } else {
    SSL_set_verify(im.ssl, SSL_VERIFY_NONE, &Impl::on_verify);  // notes only: tells errors apart
  }
  // SNI: names only (an IP address is never sent as one).
  if (ok && !is_ip) {
    ok = SSL_ctrl(im.ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                  const_cast<char*>(im.name.c_str())) == 1;  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  }
  if (!ok) return Error("TLS session for " + host + ": cannot check the name " + im.name);
  SSL_set_connect_state(im.ssl);
  im.full_handshake = im.context->offer_session(im.ssl);
  return s;
}

int TlsSession::fail(const std::string& what) {
  int reason = 0;
  const std::string text = take_openssl_error(&reason);
  if (impl_->io.last_errno != 0) {
    error_ = what + ": " + std::strerror(impl_->io.last_errno);  // NOLINT(concurrency-mt-unsafe)
  } else if (text.empty()) {
    error_ = what + ": the server closed the connection";
  } else {
    error_ = what + ": " + impl_->explain(text, reason);
  }
  return kFailed;
}

int TlsSession::handshake() {
  Impl& im = *impl_;
  ERR_clear_error();
  const int rc = SSL_do_handshake(im.ssl);
  if (rc == 1) {
    // TLS 1.2 granted its session during the handshake; a TLS 1.3 ticket comes with the first read.
    if (SSL_version(im.ssl) != TLS1_3_VERSION) im.handshake_over();
    return 0;
  }
  const int err = SSL_get_error(im.ssl, rc);
  if (err == SSL_ERROR_WANT_READ) return kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return kWantWrite;
  im.handshake_over();
  return fail("TLS handshake with " + im.host);
}

bool TlsSession::resumed() const {
  return SSL_session_reused(impl_->ssl) == 1;
}

std::string TlsSession::describe() const {
  return std::string(SSL_get_version(impl_->ssl)) + " " + SSL_get_cipher_name(impl_->ssl);
}

int TlsSession::read(char* buf, size_t len) {
  Impl& im = *impl_;
  ERR_clear_error();
  size_t n = 0;
  const int rc = SSL_read_ex(im.ssl, buf, len, &n);
  if (rc == 1) {
    im.handshake_over();  // a TLS 1.3 server's tickets come before its first response
    return static_cast<int>(n);
  }
  const int err = SSL_get_error(im.ssl, rc);
  if (err == SSL_ERROR_WANT_READ) return kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return kWantWrite;
  if (err == SSL_ERROR_ZERO_RETURN) return 0;
  if (err == SSL_ERROR_SYSCALL && im.io.last_errno == 0 && ERR_peek_error() == 0) return 0;
  return fail("TLS read from " + im.host);
}

int TlsSession::write(const char* buf, size_t len) {
  Impl& im = *impl_;
  ERR_clear_error();
  size_t n = 0;
  const int rc = SSL_write_ex(im.ssl, buf, len, &n);
  if (rc == 1) return static_cast<int>(n);
  const int err = SSL_get_error(im.ssl, rc);
  if (err == SSL_ERROR_WANT_READ) return kWantRead;
  if (err == SSL_ERROR_WANT_WRITE) return kWantWrite;
  if (im.io.last_errno != 0) {
    // With TLS 1.3 the server judges the client's certificate after the client's part of the handshake:
    // its refusal is an alert waiting to be read, and the socket already reset.
    const int write_errno = im.io.last_errno;
    im.io.last_errno = 0;
    ERR_clear_error();
    std::array<char, 256> discard{};
    size_t got = 0;
    if (SSL_read_ex(im.ssl, discard.data(), discard.size(), &got) != 1 && ERR_peek_error() != 0 &&
        im.io.last_errno == 0) {
      return fail("TLS with " + im.host);
    }
    ERR_clear_error();
    im.io.last_errno = write_errno;
  }
  return fail("TLS write to " + im.host);
}

}  // namespace dm::kube
