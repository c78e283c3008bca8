#include "kube/tls_openssl.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

namespace dm::kube::tls_detail {
namespace {

// One send() or recv() for OpenSSL: interrupted calls repeated, a full or empty socket reported as "try
// again", any other error kept for the message.
enum class Io { kWrite, kRead };

template <class Call>
int socket_io(BIO* bio, Io io_kind, const Call& call) {
  auto* io = static_cast<SocketIo*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = call(io->fd);
    if (n >= 0) return static_cast<int>(n);  // reading 0: the end of the connection
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      io->last_errno = errno;
    } else if (io_kind == Io::kWrite) {
      BIO_set_retry_write(bio);
    } else {
      BIO_set_retry_read(bio);
    }
    return -1;
  }
}

int bio_write(BIO* bio, const char* data, int len) {
  return socket_io(bio, Io::kWrite,
                   [&](int fd) { return ::send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL); });
}

int bio_read(BIO* bio, char* out, int len) {
  return socket_io(bio, Io::kRead, [&](int fd) { return ::recv(fd, out, static_cast<size_t>(len), 0); });
}

long bio_ctrl(BIO* /*unused*/, int cmd, long /*unused*/, void* /*unused*/) {
  return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

}  // namespace

// The reason of OpenSSL's first queued error of this thread, in its own words ("" when none); the queue is
// emptied.
std::string take_openssl_error(int* reason) {
  std::string text;
  int first = 0;
  while (const unsigned long e = ERR_get_error()) {
    if (!text.empty()) continue;
    first = ERR_GET_REASON(e);
    const char* r = ERR_reason_error_string(e);
    text = r != nullptr ? r : "error " + std::to_string(e);
  }
  if (reason != nullptr) *reason = first;
  return text;
}

// The subjectAltName entries of a certificate, e.g. "DNS:localhost, IP:127.0.0.1" ("none" when it has none).
std::string alt_names(X509* cert) {
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  std::string out;
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    std::string entry;
    if (name->type == GEN_DNS) {
      const ASN1_STRING* s = name->d.dNSName;
      entry = "DNS:" + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),  // NOLINT
                                   static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (name->type == GEN_IPADD) {
      const ASN1_STRING* s = name->d.iPAddress;
      std::array<char, INET6_ADDRSTRLEN> text{};
      const int len = ASN1_STRING_length(s);
      const int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
      if (family != 0 && inet_ntop(family, ASN1_STRING_get0_data(s), text.data(), text.size()) != nullptr)
        entry = std::string("IP:") + text.data();
    }
    if (entry.empty()) continue;
    if (!out.empty()) out += ", ";
    out += entry;
  }
  GENERAL_NAMES_free(names);
  return out.empty() ? "none" : out;
}

std::string name_text(const X509_NAME* name) {
  BIO* b = BIO_new(BIO_s_mem());
  X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long len = BIO_get_mem_data(b, &data);
  std::string out(data, static_cast<size_t>(len));
  BIO_free(b);
  return out;
}

const BIO_METHOD* socket_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "driver-manager socket");
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    return m;
  }();
  return method;
}

// Adds every certificate of a PEM text to the trust store; false when it holds none.
bool add_pem_certificates(X509_STORE* store, const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++added;
    X509_free(cert);
  }
  BIO_free(b);
  ERR_clear_error();  // the read past the last certificate
  return added > 0;
}

// A client certificate (and any intermediates after it) from PEM text.
bool use_pem_certificate(SSL_CTX* ctx, const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* leaf = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  bool ok = leaf != nullptr && SSL_CTX_use_certificate(ctx, leaf) == 1;
  X509_free(leaf);
  while (ok) {
    X509* extra = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    if (extra == nullptr) break;
    if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
      X509_free(extra);
      ok = false;
    }
  }
  BIO_free(b);
  if (ok) ERR_clear_error();
  return ok;
}

bool use_pem_key(SSL_CTX* ctx, const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
  const bool ok = key != nullptr && SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  BIO_free(b);
  return ok;
}

}  // namespace dm::kube::tls_detail
