// Which token stops a request: the view of the API it was sent through. A collaborator built on
// `StoppedBy(client, sigterm)` sends requests that SIGTERM stops; one built on `StoppedBy(client, cleanup)`
// sends requests that only the cleanup's own token (its deadline) stops, over the same connections. The
// implementations of Api (kube::Client, the in-memory cluster) stop a request and its retries, and a watch,
// with the token of the view the calling thread sends through, else with a token of their own.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"

namespace dm::kube {

class StoppedBy final : public Api {
 public:
  // A view of `api` whose requests `token` stops; a view of a view replaces the first view's token.
  StoppedBy(Api& api, CancelToken token);

  Result<nlohmann::json> get(const std::string& path) override;
  Result<std::vector<nlohmann::json>> list_all(const std::string& path,
                                               const ListOptions& options = {}) override;
  Result<std::vector<nlohmann::json>> list_identities(const std::string& path,
                                                      const ListOptions& options = {}) override;
  Result<nlohmann::json> create(const std::string& path, const nlohmann::json& body) override;
  Result<nlohmann::json> patch(const std::string& path, PatchType type, const nlohmann::json& body) override;
  Result<nlohmann::json> remove(const std::string& path, const DeleteOptions& options = {}) override;
  Status evict(const std::string& ns, const std::string& name, const DeleteOptions& options = {}) override;
  Status create_event(const nlohmann::json& involved_object, const std::string& reason,
                      const std::string& message, const std::string& type = "Normal") override;
  Status list_watch(const std::string& path, const ListOptions& options, const WatchHandlers& handlers,
                    Deadline deadline = {}) override;
  [[nodiscard]] std::optional<TimePoint> outage_ended_at() const override { return api_.outage_ended_at(); }

  [[nodiscard]] const CancelToken& token() const { return token_; }
  [[nodiscard]] Api& inner() const { return api_; }

  // For the implementations of Api: the token of the view the calling thread is sending a request through
  // (nullptr: it sends through none).
  static const CancelToken* current();

 private:
  Api& api_;
  CancelToken token_;
};

// The token that stops what is sent through `api`: its view's, or, for an Api that is no view, one that
// never fires. A part of the run that must also stop on its own (a thread beside the run's main line) sends
// through StoppedBy(api, stop_token_of(api).child()) and fires that child when it ends: its requests stop
// then, and still with the view's token (SIGTERM).
CancelToken stop_token_of(Api& api);

}  // namespace dm::kube
