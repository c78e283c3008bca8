#include "kube/exec_source.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "kube/exec_credential.h"
#include "kube/exec_plugin.h"

namespace dm::kube {

ExecCredentialSource::ExecCredentialSource(Config config, const Clock& clock, Duration limit)
    : config_(std::move(config)), clock_(clock), limit_(limit) {}

Result<Credentials> ExecCredentialSource::current() {
  const std::lock_guard lock(mu_);
  if (cached_ && (!expires_ || clock_.wall_now() < *expires_)) return *cached_;
  if (cached_)
    spdlog::info("The credentials of exec plugin {} expired; running it again", config_.exec->command);
  return run_locked();
}

bool ExecCredentialSource::renew_after_unauthorized(const Credentials& rejected) {
  const std::lock_guard lock(mu_);
  // Another request may have renewed them already.
  if (cached_ && *cached_ != rejected) return true;
  spdlog::info("The API server rejected the credentials of exec plugin {}; running it again",
               config_.exec->command);
  auto fresh = run_locked();
  if (!fresh) {
    spdlog::warn("{}", fresh.error().message);
    return false;
  }
  return *fresh != rejected;
}

Result<Credentials> ExecCredentialSource::run_locked() {
  const ExecConfig& exec = *config_.exec;
  cached_.reset();
  expires_.reset();
  auto info = exec_info(config_);
  if (!info) return info.error().wrap("exec credential plugin \"" + exec.command + "\"");
  auto out = run_exec_plugin(exec, *info, clock_, limit_);
  if (!out) return out.error();
  auto cred = parse_exec_credential(*out, exec.api_version);
  if (!cred) return cred.error().wrap("exec credential plugin \"" + exec.command + "\"");
  cached_ = Credentials{
      .token = cred->token, .client_cert_pem = cred->client_cert_pem, .client_key_pem = cred->client_key_pem};
  expires_ = cred->expires;
  spdlog::debug("exec plugin {} gave a {}", exec.command,
                cred->token.empty() ? "client certificate" : "token");
  return *cached_;
}

}  // namespace dm::kube
