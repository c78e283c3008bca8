// The credentials sent with each request. A token given inline stays fixed; a token file (a pod's
// service-account token, or a kubeconfig tokenFile) is rotated by the kubelet while the program runs, so it
// is re-read periodically (like client-go, every minute) and at once when the API server rejects the token
// (401), so that a run longer than one token's lifetime keeps working. An exec credential plugin gives a
// token or a client certificate of its own (kube/exec_source.h).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "kube/config.h"

namespace dm::kube {

// What a request authenticates with besides the Config's own TLS client certificate.
struct Credentials {
  std::string token;              // bearer token; "" = none
  std::string client_cert_pem{};  // a client certificate that replaces the Config's; "" = the Config's
  std::string client_key_pem{};
  bool operator==(const Credentials&) const = default;
};

// Where a client's credentials come from; thread-safe.
class CredentialSource {
 public:
  virtual ~CredentialSource() = default;
  // The credentials to send now, or why there are none (an exec plugin that failed).
  virtual Result<Credentials> current() = 0;
  // The API server rejected `rejected` (401): looks for newer credentials now. True when there are other
  // ones, so that repeating the request can succeed.
  virtual bool renew_after_unauthorized(const Credentials& rejected) = 0;
};

// The source for `config`: its exec plugin when it has one, else its token (file).
std::unique_ptr<CredentialSource> make_credential_source(const Config& config, const Clock& clock,
                                                         std::chrono::milliseconds token_refresh);

// A fixed token, or a token file read again when due.
class TokenSource final : public CredentialSource {
 public:
  // `config.token` is the token read when the configuration was loaded; `config.token_file`, if set, is
  // where newer ones appear. `refresh` is how old a file token may get before it is read again.
  TokenSource(const Config& config, const Clock& clock,
              std::chrono::milliseconds refresh = std::chrono::minutes(1));

  // The token to send now ("" = none), re-read from the file when it is due. A failed or empty read keeps
  // the previous token (and logs why): the old token may well still be valid. Never an error.
  Result<Credentials> current() override;

  // Re-reads the file now. True when the file now holds another token; false for a fixed token or an
  // unchanged file.
  bool renew_after_unauthorized(const Credentials& rejected) override;

 private:
  void reread_locked();

  std::mutex mu_;
  const Clock& clock_;
  const std::string file_;
  const std::chrono::milliseconds refresh_;
  std::string token_;
  TimePoint read_at_;
};

}  // namespace dm::kube
