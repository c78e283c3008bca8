#include "manager/commands/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <ctime>
#include <utility>

#include "common/duration_text.h"
#include "common/log.h"

namespace dm::manager {

namespace {

constexpr size_t kMaxAnnotated = 3;  // pods named in the state annotation

struct PhaseInfo {
  std::string_view name;
  std::string_view gone_verb;  // the summary's words for the pods that left the node during the phase
};

PhaseInfo info(Phase p) {
  switch (p) {
    case Phase::kPauseOperands:
      return {"pause-operands", "stopped {} operand pod{}"};
    case Phase::kEvictWorkloads:
      return {"evict-workloads", "evicted {} GPU pod{}"};
    case Phase::kUnloadDriver:
      return {"unload-driver", "drained {} pod{}"};
    case Phase::kCleanDriverRoot:
      return {"clean-driver-root", "stopped {} DRA plugin pod{}"};
    case Phase::kWaitMofed:
      return {"wait-mofed", "{} pod{} gone while waiting for MOFED"};
    case Phase::kRestore:
      return {"restore", "{} pod{} gone while restoring"};
    case Phase::kCleanupOnFailure:
      return {"cleanup-on-failure", "{} pod{} gone during the cleanup"};
  }
  return {"unknown", "{} pod{}"};
}

std::string plural(std::string_view format, size_t n) {
  return fmt::format(fmt::runtime(format), n, n == 1 ? "" : "s");
}

}  // namespace

std::string_view phase_name(Phase p) {
  return info(p).name;
}

RunProgress::RunProgress(const Clock& clock)
    : clock_(clock), run_start_(clock.now()), run_start_wall_(clock.wall_now()) {}

void RunProgress::begin(Phase p) {
  std::lock_guard lk(mu_);
  end_locked();
  current_ = p;
  phase_start_ = clock_.now();
  phase_start_wall_ = clock_.wall_now();
}

void RunProgress::end() {
  std::lock_guard lk(mu_);
  end_locked();
}

void RunProgress::end_locked() {
  if (current_) done_.push_back({*current_, clock_.now() - phase_start_});
  current_.reset();
  waiting_.reset();
}

std::optional<Phase> RunProgress::current() const {
  std::lock_guard lk(mu_);
  return current_;
}

void RunProgress::set_waiting(const WaitStatus& s) {
  std::lock_guard lk(mu_);
  waiting_ = s;
}

void RunProgress::add_paused_labels(size_t n) {
  std::lock_guard lk(mu_);
  paused_labels_ += n;
}

void RunProgress::add_pods_gone(Phase p, size_t n) {
  std::lock_guard lk(mu_);
  pods_gone_[p] += n;
}

void RunProgress::add_gpu_clients_reset(size_t n) {
  std::lock_guard lk(mu_);
  gpu_clients_reset_ += n;
}

void RunProgress::add_host_holders_evicted(size_t n) {
  std::lock_guard lk(mu_);
  host_holders_evicted_ += n;
}

void RunProgress::add_modules_unloaded(size_t n) {
  std::lock_guard lk(mu_);
  modules_unloaded_ += n;
}

void RunProgress::add_kept(const std::string& what) {
  std::lock_guard lk(mu_);
  kept_.push_back(what);
}

// `kubectl describe node` cuts an annotation after 140 characters: what matters comes first, pods by name
// only (the log has the details), the time the run began last.
std::string RunProgress::annotation_value() const {
  std::lock_guard lk(mu_);
  std::string out = fmt::format("phase={}; since={}", current_ ? phase_name(*current_) : "done",
                                rfc3339(phase_start_wall_));
  if (waiting_ && !waiting_->remaining.empty()) {
    std::vector<std::string> names;
    names.reserve(waiting_->remaining.size());
    for (const auto& r : waiting_->remaining) names.push_back(r.substr(0, r.find(" (")));
    out += fmt::format("; waiting for {} of {} pods: {}", names.size(),
                       std::max(waiting_->most, names.size()), join_names(names, kMaxAnnotated));
  }
  out += "; run started=" + rfc3339(run_start_wall_);
  return out;
}

std::vector<RunProgress::PhaseTime> RunProgress::phases() const {
  std::lock_guard lk(mu_);
  auto out = done_;
  if (current_) out.push_back({*current_, clock_.now() - phase_start_});
  return out;
}

std::string RunProgress::summary(std::string_view outcome) const {
  const auto times = phases();
  std::lock_guard lk(mu_);
  std::vector<std::string> did;
  if (paused_labels_ > 0) did.push_back(plural("paused {} operand label{}", paused_labels_));
  for (const auto& [phase, n] : pods_gone_) {
    if (n > 0) did.push_back(plural(info(phase).gone_verb, n));
    if (n > 0 && phase == Phase::kEvictWorkloads && host_holders_evicted_ > 0) {
      did.back() += fmt::format(" ({} found holding the GPU on the host)", host_holders_evicted_);
    }
    // The clients go side by side with the operands: counted apart, said right after them.
    if (phase == Phase::kPauseOperands && gpu_clients_reset_ > 0) {
      did.push_back(plural("reset {} GPU client{}", gpu_clients_reset_));
    }
  }
  if (modules_unloaded_ > 0) did.push_back(plural("unloaded {} kernel module{}", modules_unloaded_));
  std::string out = fmt::format("Summary: {} in {}: {}", outcome,
                                format_duration(clock_.now() - run_start_, DurationStyle::kTenths),
                                did.empty() ? std::string("nothing paused, evicted or unloaded")
                                            : fmt::format("{}", fmt::join(did, ", ")));
  if (!kept_.empty()) out += fmt::format("; left on the node: {}", fmt::join(kept_, ", "));
  if (!times.empty()) {
    std::vector<std::string> parts;
    parts.reserve(times.size());
    for (const auto& t : times)
      parts.push_back(
          fmt::format("{} {}", phase_name(t.phase), format_duration(t.took, DurationStyle::kTenths)));
    out += fmt::format("; phases: {}", fmt::join(parts, ", "));
  }
  return out;
}

}  // namespace dm::manager
