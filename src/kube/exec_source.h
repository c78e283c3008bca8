// Credentials from an exec credential plugin (users[].user.exec of a kubeconfig), as client-go gets them:
// the plugin runs when a request first needs credentials, its ExecCredential is kept until its
// expirationTimestamp (or, without one, until the API server rejects it), and it runs again after that or
// after a 401 for the credentials it gave.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>

#include "common/clock.h"
#include "kube/config.h"
#include "kube/token_source.h"

namespace dm::kube {

class ExecCredentialSource final : public CredentialSource {
 public:
  // `config.exec` must be set. `limit` bounds each run of the plugin (kube/exec_plugin.h).
  ExecCredentialSource(Config config, const Clock& clock, Duration limit = std::chrono::seconds(60));

  // The kept credentials while they are valid, else the plugin's new ones; the plugin's error names the
  // command.
  Result<Credentials> current() override;
  // Runs the plugin again unless another request already did. True when it gave other credentials; a run
  // that fails is logged and gives false (the request's 401 stands).
  bool renew_after_unauthorized(const Credentials& rejected) override;

 private:
  Result<Credentials> run_locked();

  std::mutex mu_;
  const Config config_;
  const Clock& clock_;
  const Duration limit_;
  std::optional<Credentials> cached_;
  std::optional<std::chrono::system_clock::time_point> expires_;
};

}  // namespace dm::kube
