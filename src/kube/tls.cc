#include "kube/tls.h"

#include <arpa/inet.h>
#include <mbedtls/asn1.h>
#include <mbedtls/ecp.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

namespace dm::kube {
namespace {

// The system's CA bundle: used only when the Config names no CA (a public server certificate).
constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";

std::string mbed_error(int rc) {
  std::array<char, 160> buf{};
  mbedtls_strerror(rc, buf.data(), buf.size());
  return std::string(buf.data()) + " (-0x" + [rc] {
    std::array<char, 16> hex{};
    std::snprintf(hex.data(), hex.size(), "%04x", static_cast<unsigned>(-rc));
    return std::string(hex.data());
  }() + ")";
}

// Random bytes for the handshake straight from the kernel: no DRBG state to seed, and safe from any thread.
int random_bytes(void* /*unused*/, unsigned char* out, size_t len) {
  while (len > 0) {
    const ssize_t n = getrandom(out, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
    }
    out += n;
    len -= static_cast<size_t>(n);
  }
  return 0;
}

// PEM text as mbedTLS wants it: with its terminating NUL counted.
const unsigned char* pem_bytes(const std::string& pem) {
  return reinterpret_cast<const unsigned char*>(
      pem.c_str());  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

// Whether the certificate's subjectAltName extension lists this IP address (mbedTLS 2.28 checks DNS names
// only, so an https://IP server is matched here, as Go and OpenSSL do).
bool cert_has_ip(const mbedtls_x509_crt& crt, const unsigned char* ip, size_t ip_len) {
  unsigned char* p = crt.v3_ext.p;
  if (p == nullptr) return false;
  const unsigned char* end = p + crt.v3_ext.len;
  size_t len = 0;
  if (mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE) != 0)
    return false;
  end = p + len;
  while (p < end) {
    if (mbedtls_asn1_get_tag(&p, end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE) != 0)
      return false;
    const unsigned char* ext_end = p + len;
    mbedtls_asn1_buf oid{};
    if (mbedtls_asn1_get_tag(&p, ext_end, &oid.len, MBEDTLS_ASN1_OID) != 0) return false;
    oid.p = p;
    p += oid.len;
    int critical = 0;
    (void)mbedtls_asn1_get_bool(&p, ext_end, &critical);  // optional
    if (mbedtls_asn1_get_tag(&p, ext_end, &len, MBEDTLS_ASN1_OCTET_STRING) != 0) return false;
    if (MBEDTLS_OID_CMP(MBEDTLS_OID_SUBJECT_ALT_NAME, &oid) == 0) {
      const unsigned char* names_end = p + len;
      if (mbedtls_asn1_get_tag(&p, names_end, &len, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE) != 0) {
        return false;
      }
      while (p < names_end) {
        const unsigned char tag = *p++;
        if (mbedtls_asn1_get_len(&p, names_end, &len) != 0) return false;
        if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) && len == ip_len && std::memcmp(p, ip, len) == 0)
          return true;
        p += len;
      }
      return false;
    }
    p = const_cast<unsigned char*>(ext_end);  // NOLINT(cppcoreguidelines-pro-type-const-cast): same buffer
  }
  return false;
}

// Key exchange curves, cheapest first: the client's order decides (the API server, like Go's TLS stack in
// general, takes the first curve of the client's list it supports), and mbedTLS's default order starts
// with P-521, several times slower than X25519 or P-256 on both ends. Every curve mbedTLS knows stays
// accepted (the list also bounds the server certificate's curve), only the order changes.
std::vector<mbedtls_ecp_group_id> curve_preference() {
  std::vector<mbedtls_ecp_group_id> order;
  for (const auto id : {MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_SECP384R1}) {
    if (mbedtls_ecp_curve_info_from_grp_id(id) != nullptr) order.push_back(id);
  }
  for (const mbedtls_ecp_group_id* id = mbedtls_ecp_grp_id_list(); *id != MBEDTLS_ECP_DP_NONE; ++id) {
    if (std::find(order.begin(), order.end(), *id) == order.end()) order.push_back(*id);
  }
  order.push_back(MBEDTLS_ECP_DP_NONE);
  return order;
}

}  // namespace

struct TlsContext::Impl {
  mbedtls_ssl_config conf{};
  mbedtls_x509_crt ca{};
  mbedtls_x509_crt cert{};
  mbedtls_pk_context key{};
  bool verify = true;
  std::vector<mbedtls_ecp_group_id> curves = curve_preference();

  // The session the last full or resumed handshake established, offered by the next connection.
  std::mutex session_mu;
  std::condition_variable session_cv;
  mbedtls_ssl_session session{};
  bool has_session = false;
  // A full handshake is under way: connections opened beside it (the first requests of a run go out
  // together) wait for its session and resume it instead of each paying for a key exchange and the
  // certificate checks, at most this long.
  bool full_handshake_running = false;
  static constexpr std::chrono::milliseconds kAwaitFirstSession{1000};

  Impl() {
    mbedtls_ssl_config_init(&conf);
    mbedtls_x509_crt_init(&ca);
    mbedtls_x509_crt_init(&cert);
    mbedtls_pk_init(&key);
    mbedtls_ssl_session_init(&session);
  }
  ~Impl() {
    mbedtls_ssl_config_free(&conf);
    mbedtls_x509_crt_free(&ca);
    mbedtls_x509_crt_free(&cert);
    mbedtls_pk_free(&key);
    mbedtls_ssl_session_free(&session);
  }

  // Offers the remembered session, if any, to a connection about to shake hands; with none yet and another
  // connection's full handshake under way, waits for its session first. Returns whether this connection
  // shakes hands in full (it then calls full_handshake_over() when done, whatever the outcome).
  bool offer_session(mbedtls_ssl_context& ssl) {
    std::unique_lock lock(session_mu);
    if (!has_session && full_handshake_running) {
      session_cv.wait_for(lock, kAwaitFirstSession,
                          [this] { return has_session || !full_handshake_running; });
    }
    if (has_session) {
      (void)mbedtls_ssl_set_session(&ssl, &session);  // a failure means a full handshake
      return false;
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
  // Remembers the session of a completed handshake for the next connection.
  void remember_session(const mbedtls_ssl_context& ssl) {
    mbedtls_ssl_session fresh;
    mbedtls_ssl_session_init(&fresh);
    if (mbedtls_ssl_get_session(&ssl, &fresh) == 0) {
      const std::lock_guard lock(session_mu);
      std::swap(session, fresh);  // the structs own their buffers: swapping hands them over
      has_session = true;
    }
    mbedtls_ssl_session_free(&fresh);
    session_cv.notify_all();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

TlsContext::TlsContext() : impl_(std::make_unique<Impl>()) {}
TlsContext::~TlsContext() = default;

Result<std::unique_ptr<TlsContext>> TlsContext::create(const Config& config) {
  std::unique_ptr<TlsContext> ctx(new TlsContext());
  Impl& im = *ctx->impl_;
  const std::string what = "TLS setup for " + config.source;
  auto check = [&](int rc, const std::string& field) -> Status {
    if (rc < 0) return Error(what + ": cannot use " + field + ": " + mbed_error(rc));
    return {};
  };
  Status st;
  if (!config.ca_data.empty()) {
    st = check(mbedtls_x509_crt_parse(&im.ca, pem_bytes(config.ca_data), config.ca_data.size() + 1),
               "certificate-authority-data");
  } else if (!config.ca_file.empty()) {
    st = check(mbedtls_x509_crt_parse_file(&im.ca, config.ca_file.c_str()),
               "certificate-authority " + config.ca_file);
  } else if (!config.insecure_skip_tls_verify) {
    st = check(mbedtls_x509_crt_parse_file(&im.ca, kSystemCaBundle),
               std::string("CA bundle ") + kSystemCaBundle);
  }
  if (!st) return st.error();

  const bool has_cert = !config.client_cert_data.empty() || !config.client_cert_file.empty();
  const bool has_key = !config.client_key_data.empty() || !config.client_key_file.empty();
  if (has_cert != has_key)
    return Error(what + ": a client certificate needs its key and a key its certificate");
  if (!config.client_cert_data.empty()) {
    st = check(mbedtls_x509_crt_parse(&im.cert, pem_bytes(config.client_cert_data),
                                      config.client_cert_data.size() + 1),
               "client-certificate-data");
  } else if (!config.client_cert_file.empty()) {
    st = check(mbedtls_x509_crt_parse_file(&im.cert, config.client_cert_file.c_str()),
               "client-certificate " + config.client_cert_file);
  }
  if (!st) return st.error();
  if (!config.client_key_data.empty()) {
    st = check(mbedtls_pk_parse_key(&im.key, pem_bytes(config.client_key_data),
                                    config.client_key_data.size() + 1, nullptr, 0),
               "client-key-data");
  } else if (!config.client_key_file.empty()) {
    st = check(mbedtls_pk_parse_keyfile(&im.key, config.client_key_file.c_str(), nullptr),
               "client-key " + config.client_key_file);
  }
  if (!st) return st.error();

  st = check(mbedtls_ssl_config_defaults(&im.conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                         MBEDTLS_SSL_PRESET_DEFAULT),
             "TLS defaults");
  if (!st) return st.error();
  // TLS 1.2 at least, as the API server (Go) requires by default.
  mbedtls_ssl_conf_min_version(&im.conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
  mbedtls_ssl_conf_rng(&im.conf, random_bytes, nullptr);
  im.verify = !config.insecure_skip_tls_verify;
  mbedtls_ssl_conf_authmode(&im.conf, im.verify ? MBEDTLS_SSL_VERIFY_REQUIRED : MBEDTLS_SSL_VERIFY_NONE);
  mbedtls_ssl_conf_ca_chain(&im.conf, &im.ca, nullptr);
  mbedtls_ssl_conf_curves(&im.conf, im.curves.data());
  if (has_cert) {
    st = check(mbedtls_ssl_conf_own_cert(&im.conf, &im.cert, &im.key), "client certificate and key");
    if (!st) return st.error();
  }
  return ctx;
}

struct TlsSession::Impl {
  mbedtls_ssl_context ssl{};
  TlsContext::Impl* context = nullptr;  // outlives the session (the connection holds both)
  bool certificate_checked = false;     // this handshake verified a certificate chain: not a resumption
  int fd = -1;
  int last_errno = 0;  // of the socket call that failed
  bool verify = true;
  bool host_is_ip = false;
  std::array<unsigned char, 16> ip{};
  size_t ip_len = 0;
  std::string host;
  bool full_handshake = false;  // offered no session: the context's other connections may wait for ours

  Impl() { mbedtls_ssl_init(&ssl); }
  ~Impl() {
    handshake_over();
    mbedtls_ssl_free(&ssl);
  }
  void handshake_over() {
    if (full_handshake && context != nullptr) context->full_handshake_over();
    full_handshake = false;
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  static int send(void* ctx, const unsigned char* buf, size_t len) {
    auto* self = static_cast<Impl*>(ctx);
    while (true) {
      const ssize_t n = ::send(self->fd, buf, len, MSG_NOSIGNAL);
      if (n >= 0) return static_cast<int>(n);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return MBEDTLS_ERR_SSL_WANT_WRITE;
      self->last_errno = errno;
      return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
    }
  }
  // Called by mbedTLS for each certificate of the chain it verifies; only a full handshake verifies one.
  static int saw_certificate(void* ctx, mbedtls_x509_crt* /*unused*/, int /*unused*/, uint32_t* /*unused*/) {
    static_cast<Impl*>(ctx)->certificate_checked = true;
    return 0;  // the verdict stays mbedTLS's own
  }
  static int recv(void* ctx, unsigned char* buf, size_t len) {
    auto* self = static_cast<Impl*>(ctx);
    while (true) {
      const ssize_t n = ::recv(self->fd, buf, len, 0);
      if (n >= 0) return static_cast<int>(n);  // 0: mbedTLS reports the end of the connection
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return MBEDTLS_ERR_SSL_WANT_READ;
      self->last_errno = errno;
      return MBEDTLS_ERR_SSL_INTERNAL_ERROR;
    }
  }
};

TlsSession::TlsSession() : impl_(std::make_unique<Impl>()) {}
TlsSession::~TlsSession() = default;

Result<std::unique_ptr<TlsSession>> TlsSession::create(const TlsContext& context, int fd,
                                                       const std::string& host) {
  std::unique_ptr<TlsSession> s(new TlsSession());
  Impl& im = *s->impl_;
  im.fd = fd;
  im.host = host;
  im.context = context.impl_.get();
  im.verify = context.impl_->verify;
  if (inet_pton(AF_INET, host.c_str(), im.ip.data()) == 1) {
    im.ip_len = 4;
  } else if (inet_pton(AF_INET6, host.c_str(), im.ip.data()) == 1) {
    im.ip_len = 16;
  }
  im.host_is_ip = im.ip_len > 0;
  int rc = mbedtls_ssl_setup(&im.ssl, &context.impl_->conf);
  // A name is checked (and sent as SNI) by mbedTLS; an IP address after the handshake, against the SANs.
  if (rc == 0 && !im.host_is_ip) rc = mbedtls_ssl_set_hostname(&im.ssl, host.c_str());
  if (rc != 0) return Error("TLS session for " + host + ": " + mbed_error(rc));
  mbedtls_ssl_set_bio(&im.ssl, &im, &Impl::send, &Impl::recv, nullptr);
  mbedtls_ssl_set_verify(&im.ssl, &Impl::saw_certificate, &im);
  im.full_handshake = im.context->offer_session(im.ssl);
  return s;
}

int TlsSession::fail(int rc, const std::string& what) {
  if (impl_->last_errno != 0) {
    error_ = what + ": " + std::strerror(impl_->last_errno);  // NOLINT(concurrency-mt-unsafe)
  } else if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
    std::array<char, 512> info{};
    mbedtls_x509_crt_verify_info(info.data(), info.size(), "", mbedtls_ssl_get_verify_result(&impl_->ssl));
    std::string why(info.data());
    while (!why.empty() && why.back() == '\n') why.pop_back();
    for (char& c : why) c = c == '\n' ? ';' : c;
    error_ = what + ": the server certificate of " + impl_->host + " is not trusted: " + why;
  } else {
    error_ = what + ": " + mbed_error(rc);
  }
  return kFailed;
}

int TlsSession::handshake() {
  Impl& im = *impl_;
  const int rc = mbedtls_ssl_handshake(&im.ssl);
  if (rc == MBEDTLS_ERR_SSL_WANT_READ) return kWantRead;
  if (rc == MBEDTLS_ERR_SSL_WANT_WRITE) return kWantWrite;
  if (rc != 0) {
    im.handshake_over();
    return fail(rc, "TLS handshake with " + im.host);
  }
  if (im.verify && im.host_is_ip) {
    const mbedtls_x509_crt* peer = mbedtls_ssl_get_peer_cert(&im.ssl);
    if (peer == nullptr || !cert_has_ip(*peer, im.ip.data(), im.ip_len)) {
      error_ =
          "TLS handshake with " + im.host + ": the server certificate is not valid for IP address " + im.host;
      im.handshake_over();
      return kFailed;
    }
  }
  im.context->remember_session(im.ssl);
  im.handshake_over();
  return 0;
}

bool TlsSession::resumed() const {
  return impl_->verify && !impl_->certificate_checked;
}

std::string TlsSession::describe() const {
  return std::string(mbedtls_ssl_get_version(&impl_->ssl)) + " " + mbedtls_ssl_get_ciphersuite(&impl_->ssl);
}

int TlsSession::read(char* buf, size_t len) {
  const int rc = mbedtls_ssl_read(&impl_->ssl, reinterpret_cast<unsigned char*>(buf), len);  // NOLINT
  if (rc >= 0) return rc;
  if (rc == MBEDTLS_ERR_SSL_WANT_READ) return kWantRead;
  if (rc == MBEDTLS_ERR_SSL_WANT_WRITE) return kWantWrite;
  if (rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || rc == MBEDTLS_ERR_SSL_CONN_EOF) return 0;
  return fail(rc, "TLS read");
}

int TlsSession::write(const char* buf, size_t len) {
  const int rc = mbedtls_ssl_write(&impl_->ssl, reinterpret_cast<const unsigned char*>(buf), len);  // NOLINT
  if (rc >= 0) return rc;
  if (rc == MBEDTLS_ERR_SSL_WANT_READ) return kWantRead;
  if (rc == MBEDTLS_ERR_SSL_WANT_WRITE) return kWantWrite;
  return fail(rc, "TLS write");
}

}  // namespace dm::kube
