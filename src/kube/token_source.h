// The bearer token sent with each request. A token given inline stays fixed; a token file (a pod's
// service-account token, or a kubeconfig tokenFile) is rotated by the kubelet while the program runs, so it
// is re-read periodically (like client-go, every minute) and at once when the API server rejects the token
// (401), so that a run longer than one token's lifetime keeps working.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "kube/config.h"

namespace dm::kube {

class TokenSource {
 public:
  // `config.token` is the token read when the configuration was loaded; `config.token_file`, if set, is
  // where newer ones appear. `refresh` is how old a file token may get before it is read again.
  TokenSource(const Config& config, const Clock& clock,
              std::chrono::milliseconds refresh = std::chrono::minutes(1));

  // The token to send now ("" = none), re-read from the file when it is due. A failed or empty read keeps
  // the previous token (and logs why): the old token may well still be valid.
  std::string current();

  // The API server rejected `rejected` (401): re-reads the file now. True when the file now holds another
  // token, so that repeating the request can succeed; false for a fixed token or an unchanged file.
  bool renew_after_unauthorized(const std::string& rejected);

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
