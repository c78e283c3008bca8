#include "manager/pods/wait_progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/duration_text.h"

namespace dm::manager {

namespace {

constexpr size_t kMaxListed = 10;  // pods named in a progress line

// Whole seconds, a wait under a second included ("0s"): the progress line counts seconds.
std::string whole_seconds(Duration d) {
  return format_duration(std::chrono::duration_cast<std::chrono::seconds>(d), DurationStyle::kWholeSeconds);
}

}  // namespace

std::string join_names(const std::vector<std::string>& items, size_t limit) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) {
    if (i > 0) out += ", ";
    out += items[i];
  }
  if (items.size() > limit) out += fmt::format(" and {} more", items.size() - limit);
  return out;
}

std::string wait_progress_line(const WaitStatus& s) {
  const std::string left = s.left ? whole_seconds(*s.left) + " left" : std::string("no time limit");
  return fmt::format("Still waiting for {}: {} of {} left: {} (elapsed {}, {})", s.what, s.remaining.size(),
                     std::max(s.most, s.remaining.size()), join_names(s.remaining, kMaxListed),
                     whole_seconds(s.elapsed), left);
}

WaitProgress::WaitProgress(const Clock& clock, std::string what, Deadline deadline, Duration every,
                           const WaitObserver* observer)
    : clock_(clock),
      what_(std::move(what)),
      deadline_(deadline),
      every_(every),
      observer_(observer != nullptr && *observer ? observer : nullptr),
      start_(clock.now()),
      next_log_(start_ + every) {}

void WaitProgress::update(const std::vector<std::string>& remaining) {
  most_ = std::max(most_, remaining.size());
  const auto now = clock_.now();
  const bool log = now >= next_log_;
  if (started_ && !log) return;
  WaitStatus s{what_, remaining, most_, now - start_, std::nullopt};
  if (!deadline_.unlimited()) s.left = deadline_.remaining(clock_);
  if (log) {
    spdlog::info("{}", wait_progress_line(s));
    next_log_ = now + every_;
  }
  if (observer_ != nullptr) (*observer_)(s, !started_);
  started_ = true;
}

}  // namespace dm::manager
