#include "finisher.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace nodesim {

Finisher::Finisher(dm::kube::Api& client, const dm::Clock& clock, unsigned workers)
    : client_(client), clock_(clock) {
  workers_.reserve(workers);
  for (unsigned i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });
}

Finisher::~Finisher() {
  {
    const std::lock_guard lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void Finisher::submit(Job job) {
  {
    const std::lock_guard lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

std::vector<Finisher::Outcome> Finisher::take_outcomes() {
  const std::lock_guard lock(mu_);
  has_outcomes_.store(false, std::memory_order_release);
  return std::exchange(outcomes_, {});
}

void Finisher::work() {
  while (true) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const bool finished = finish(job);
    const std::lock_guard lock(mu_);
    outcomes_.push_back({job.uid, finished});
    has_outcomes_.store(true, std::memory_order_release);
  }
}

bool Finisher::finish(const Job& job) {
  const std::string key = job.ns + "/" + job.name;
  const auto since = [&] {
    return std::chrono::duration<double>(clock_.now() - job.terminating_since).count();
  };
  spdlog::info("pod {}: terminated after {:.2f} s, deleting it", key, since());
  dm::kube::DeleteOptions del;
  del.grace_period_seconds = 0;
  del.uid = job.uid;
  auto removed = client_.remove(dm::kube::paths::pod(job.ns, job.name), del);
  if (removed || removed.error().not_found() || removed.error().conflict()) {
    // 404: already gone; 409: the UID precondition failed, i.e. a different pod of that name now exists.
    spdlog::info("pod {}: finished (deleted {:.2f} s after it started terminating)", key, since());
    return true;
  }
  if (!removed.error().cancelled()) {
    spdlog::warn("pod {}: cannot finish its deletion: {} (retrying)", key, removed.error().message);
  }
  return false;
}

}  // namespace nodesim
