// The progress of one pod wait: the line every wait logs at a steady cadence, and what it tells the wait's
// observer (the run's progress reporter) about what is left.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace dm::manager {

// What one wait still waits for, as the progress line and the state annotation name it.
struct WaitStatus {
  std::string what;                    // "GPU operand pods to shut down"
  std::vector<std::string> remaining;  // one entry per pod ("ns/name (detail)")
  size_t most = 0;                     // the most entries the wait has had (the "of M")
  Duration elapsed{};
  std::optional<Duration> left;  // nullopt: no deadline
};

// Called by every wait whenever it logs its progress line, and once when it starts.
using WaitObserver = std::function<void(const WaitStatus&, bool started)>;

// "a, b, c and 4 more": at most `limit` names (progress lines, timeouts, the state annotation).
std::string join_names(const std::vector<std::string>& items, size_t limit);

// "Still waiting for <what>: <n> of <m> left: <names> (elapsed <e>, <r> left)" (at most 10 names).
std::string wait_progress_line(const WaitStatus& s);

// The progress of one wait: update() it with what remains on every check; it logs the progress line every
// `every` (counted from the start) and tells `observer` (may be null) at the start and at each line.
class WaitProgress {
 public:
  WaitProgress(const Clock& clock, std::string what, Deadline deadline, Duration every,
               const WaitObserver* observer);
  void update(const std::vector<std::string>& remaining);
  [[nodiscard]] Duration elapsed() const { return clock_.now() - start_; }

 private:
  const Clock& clock_;
  std::string what_;
  Deadline deadline_;
  Duration every_;
  const WaitObserver* observer_;
  TimePoint start_;
  TimePoint next_log_;
  size_t most_ = 0;
  bool started_ = false;
};

}  // namespace dm::manager
