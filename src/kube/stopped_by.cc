#include "kube/stopped_by.h"

#include <utility>

namespace dm::kube {

namespace {

thread_local const CancelToken* this_threads_token = nullptr;

// The view's token for the implementation below it, for the length of one call on this thread.
class Sending {
 public:
  explicit Sending(const CancelToken& token) : previous_(this_threads_token) { this_threads_token = &token; }
  ~Sending() { this_threads_token = previous_; }
  Sending(const Sending&) = delete;
  Sending& operator=(const Sending&) = delete;

 private:
  const CancelToken* previous_;
};

Api& beneath(Api& api) {
  auto* view = dynamic_cast<StoppedBy*>(&api);
  return view != nullptr ? view->inner() : api;
}

}  // namespace

StoppedBy::StoppedBy(Api& api, CancelToken token) : api_(beneath(api)), token_(std::move(token)) {}

CancelToken stop_token_of(Api& api) {
  auto* view = dynamic_cast<StoppedBy*>(&api);
  return view != nullptr ? view->token() : CancelToken();
}

const CancelToken* StoppedBy::current() {
  return this_threads_token;
}

Result<nlohmann::json> StoppedBy::get(const std::string& path) {
  const Sending sending(token_);
  return api_.get(path);
}

Result<std::vector<nlohmann::json>> StoppedBy::list_all(const std::string& path, const ListOptions& options) {
  const Sending sending(token_);
  return api_.list_all(path, options);
}

Result<std::vector<nlohmann::json>> StoppedBy::list_identities(const std::string& path,
                                                               const ListOptions& options) {
  const Sending sending(token_);
  return api_.list_identities(path, options);
}

Result<nlohmann::json> StoppedBy::create(const std::string& path, const nlohmann::json& body) {
  const Sending sending(token_);
  return api_.create(path, body);
}

Result<nlohmann::json> StoppedBy::patch(const std::string& path, PatchType type, const nlohmann::json& body) {
  const Sending sending(token_);
  return api_.patch(path, type, body);
}

Result<nlohmann::json> StoppedBy::remove(const std::string& path, const DeleteOptions& options) {
  const Sending sending(token_);
  return api_.remove(path, options);
}

Status StoppedBy::evict(const std::string& ns, const std::string& name, const DeleteOptions& options) {
  const Sending sending(token_);
  return api_.evict(ns, name, options);
}

Status StoppedBy::create_event(const nlohmann::json& involved_object, const std::string& reason,
                               const std::string& message, const std::string& type) {
  const Sending sending(token_);
  return api_.create_event(involved_object, reason, message, type);
}

Status StoppedBy::list_watch(const std::string& path, const ListOptions& options,
                             const WatchHandlers& handlers, Deadline deadline) {
  const Sending sending(token_);
  return api_.list_watch(path, options, handlers, deadline);
}

}  // namespace dm::kube
