// A small Kubernetes API client over kube/http + nlohmann/json: the real implementation of kube::Api (api.h),
// just what driver-manager and node-sim need. Objects are plain JSON (see objects.h for typed views). Paths
// are API paths (see paths below).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "kube/api.h"
#include "kube/config.h"

namespace dm::kube {

struct ClientOptions {
  std::chrono::milliseconds request_timeout{30000};  // every request but watches
  // How long a request that the API server does not answer (connection errors, 5xx) is tried again when
  // what it serves has no deadline of its own (kube::RequestDeadline); zero: never tried again. Time turned
  // away with 429 (an overloaded server that did not look at the request) is not counted: such a request
  // is tried until the server takes it (or the run is stopped).
  std::chrono::milliseconds retry_for{std::chrono::minutes(5)};
  std::chrono::milliseconds retry_base{200};  // backoff base, doubled per attempt, with jitter
  std::chrono::milliseconds retry_max{10000};
  std::string user_agent = "driver-manager";
  const Clock* clock = nullptr;  // nullptr: a SystemClock
  // Aborts retries and watches, unless they are sent through a view with a token of its own (StoppedBy).
  CancelToken cancel;
  // How long a write already under way when its token fires is let finish, so that its answer says whether
  // it was applied (inside the 5 s a SIGTERM's budget keeps back from the grace period).
  std::chrono::milliseconds write_settle{2000};
  // How old a token read from a file (Config::token_file) may get before it is read again; a 401 re-reads
  // it at once and repeats the request when the token changed.
  std::chrono::milliseconds token_refresh{60000};
};

// Thread-safe: sequential requests reuse one keep-alive connection; concurrent requests (e.g. parallel
// evictions) borrow further pooled keep-alive connections (at most 8) instead of queueing behind each other,
// evictions at most kParallelEvictions of them, so that two stay free for everything else; each list_watch
// call streams on a connection of its own.
class Client final : public Api {
 public:
  static Result<std::unique_ptr<Client>> create(const Config& config, ClientOptions options = {});
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  Result<nlohmann::json> get(const std::string& path) override;
  // Every page, following metadata.continue.
  Result<std::vector<nlohmann::json>> list_all(const std::string& path,
                                               const ListOptions& options = {}) override;
  // The same, each item reduced to kind, apiVersion and metadata.uid, .name and .namespace while the
  // response is parsed: what exists, without holding every object whole.
  Result<std::vector<nlohmann::json>> list_identities(const std::string& path,
                                                      const ListOptions& options = {}) override;
  Result<nlohmann::json> create(const std::string& path, const nlohmann::json& body) override;
  Result<nlohmann::json> patch(const std::string& path, PatchType type, const nlohmann::json& body) override;
  Result<nlohmann::json> remove(const std::string& path, const DeleteOptions& options = {}) override;

  // POSTs an Eviction for the pod (policy/v1, or policy/v1beta1 when discovery says the server has no
  // v1; discovery runs once). 429 = blocked by a PodDisruptionBudget (message names it), 404 = pod gone.
  Status evict(const std::string& ns, const std::string& name, const DeleteOptions& options = {}) override;

  // Creates a core/v1 Event about an object (reason, message, type Normal|Warning).
  Status create_event(const nlohmann::json& involved_object, const std::string& reason,
                      const std::string& message, const std::string& type = "Normal") override;

  // List then watch `path` (a collection) with the selectors of `options` until handlers.done() returns
  // true (ok), `deadline` passes (error "timed out ..."), or its cancel token fires (error
  // "cancelled"). Resumes from the last resourceVersion after a dropped connection; re-lists on 410.
  Status list_watch(const std::string& path, const ListOptions& options, const WatchHandlers& handlers,
                    Deadline deadline = {}) override;
  [[nodiscard]] std::optional<TimePoint> outage_ended_at() const override;

  // Number of HTTP requests sent so far (for benchmarks and tests).
  [[nodiscard]] uint64_t request_count() const;
  [[nodiscard]] const Config& config() const;

  struct Impl;  // internals shared by client.cc and watch.cc (client_impl.h), opaque to everyone else

 private:
  Client();
  std::unique_ptr<Impl> impl_;
};

}  // namespace dm::kube
