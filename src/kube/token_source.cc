#include "kube/token_source.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kube/exec_source.h"

namespace dm::kube {
namespace {

std::string trimmed(const std::string& s) {
  const char* ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

TokenSource::TokenSource(const Config& config, const Clock& clock, std::chrono::milliseconds refresh)
    : clock_(clock),
      file_(config.token_file),
      refresh_(refresh),
      token_(config.token),
      read_at_(clock.now()) {}

std::unique_ptr<CredentialSource> make_credential_source(const Config& config, const Clock& clock,
                                                         std::chrono::milliseconds token_refresh) {
  if (config.exec) return std::make_unique<ExecCredentialSource>(config, clock);
  return std::make_unique<TokenSource>(config, clock, token_refresh);
}

Result<Credentials> TokenSource::current() {
  const std::lock_guard lock(mu_);
  if (!file_.empty() && clock_.now() - read_at_ >= refresh_) reread_locked();
  return Credentials{.token = token_};
}

bool TokenSource::renew_after_unauthorized(const Credentials& rejected_credentials) {
  const std::string& rejected = rejected_credentials.token;
  const std::lock_guard lock(mu_);
  if (file_.empty()) return false;
  // Another request may have renewed it already.
  if (token_ == rejected) reread_locked();
  if (token_ == rejected) return false;
  spdlog::info("The API server rejected the bearer token; retrying with the newer token in {}", file_);
  return true;
}

void TokenSource::reread_locked() {
  read_at_ = clock_.now();
  std::ifstream in(file_, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    spdlog::warn("Cannot re-read the bearer token file {}: {}; using the previous token", file_,
                 std::strerror(errno));
    return;
  }
  std::string token = trimmed(text.str());
  if (token.empty()) {
    // The kubelet replaces the file atomically, so this is not a rotation in progress: keep the old token.
    spdlog::warn("The bearer token file {} is empty; using the previous token", file_);
    return;
  }
  if (token != token_) spdlog::debug("bearer token file {} holds a new token", file_);
  token_ = std::move(token);
}

}  // namespace dm::kube
