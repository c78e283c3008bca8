// node-sim's pod finisher: the DELETE (grace period 0, UID precondition) that removes a pod whose
// termination is over, sent from a few worker threads so that pods due at the same moment are gone at the
// same moment, as a kubelet's per-pod workers end each pod on its own. The simulator's thread decides when a
// pod is due (and drops its device refcount first), hands in a job and later collects the outcome; a job
// carries copies of everything its request needs, so a worker never touches the simulator's pods, which a
// watch event may erase at any time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "kube/api.h"

namespace nodesim {

class Finisher {
 public:
  struct Job {
    std::string uid;
    std::string ns;
    std::string name;
    dm::TimePoint terminating_since;  // when node-sim saw the deletion (for the log line)
  };
  struct Outcome {
    std::string uid;
    bool finished = false;  // deleted, already gone, or replaced by a pod of another UID; false: retry
  };

  // `client` must be thread-safe (every kube::Api is) and outlive the Finisher; its cancel token ends a
  // request in flight when node-sim stops.
  Finisher(dm::kube::Api& client, const dm::Clock& clock, unsigned workers);
  // Drops the jobs not yet started and joins the workers (each finishes the request it is sending).
  ~Finisher();
  Finisher(const Finisher&) = delete;
  Finisher& operator=(const Finisher&) = delete;

  void submit(Job job);
  // The outcomes since the last call, oldest first.
  std::vector<Outcome> take_outcomes();
  // Some outcome waits to be taken (cheap: no lock).
  [[nodiscard]] bool has_outcomes() const { return has_outcomes_.load(std::memory_order_acquire); }

 private:
  void work();
  bool finish(const Job& job);

  dm::kube::Api& client_;
  const dm::Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::vector<Outcome> outcomes_;
  bool stopping_ = false;
  std::atomic<bool> has_outcomes_{false};
  std::vector<std::thread> workers_;  // last: started once the members above exist
};

}  // namespace nodesim
