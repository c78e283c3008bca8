#include "manager/commands/progress_reporter.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace dm::manager {

StateWrite state_write_for(Phase phase) {
  switch (phase) {
    case Phase::kPauseOperands:
    case Phase::kUnloadDriver:
    case Phase::kCleanDriverRoot:
    case Phase::kRestore:
      return StateWrite::kRideAlong;
    default:
      return StateWrite::kNow;
  }
}

ProgressReporter::ProgressReporter(kube::Api& client, const Clock& clock, std::string node_name,
                                   KnownNode& known)
    : cancel_writes_(kube::stop_token_of(client).child()),
      client_(client, cancel_writes_),
      clock_(clock),
      node_name_(std::move(node_name)),
      known_(known),
      progress_(clock),
      writer_([this] { write_loop(); }) {}

ProgressReporter::~ProgressReporter() {
  stop();
}

void ProgressReporter::begin(Phase phase, StateWrite write) {
  progress_.begin(phase);
  const bool ride_along = write == StateWrite::kRideAlong;
  {
    std::lock_guard lk(state_mu_);
    pending_ = ride_along;
    refresh_due_ = false;
    wait_written_at_.reset();
    wait_written_.clear();
  }
  if (!ride_along) write_now();
}

std::optional<std::string> ProgressReporter::ride_along_state() {
  std::lock_guard lk(state_mu_);
  if (!pending_) return std::nullopt;
  return progress_.annotation_value();
}

void ProgressReporter::carried() {
  std::lock_guard lk(state_mu_);
  pending_ = false;
}

void ProgressReporter::on_wait(const WaitStatus& status, bool started) {
  constexpr auto kLongWait = std::chrono::seconds(15);
  constexpr auto kRefresh = std::chrono::seconds(30);
  progress_.set_waiting(status);
  bool write = false;
  {
    std::lock_guard lk(state_mu_);
    const auto now = clock_.now();
    if (started && pending_) {
      write = true;
      pending_ = false;
    } else if (status.elapsed >= kLongWait && status.remaining != wait_written_ &&
               (!wait_written_at_ || now - *wait_written_at_ >= kRefresh)) {
      write = !refresh_by_renewal_;
      refresh_due_ = refresh_by_renewal_;
      wait_written_at_ = now;
      wait_written_ = status.remaining;
    }
  }
  if (write) post();
}

RenewalRider ProgressReporter::renewal_rider() {
  {
    std::lock_guard lk(state_mu_);
    refresh_by_renewal_ = true;
  }
  RenewalRider rider;
  rider.take = [this]() -> std::optional<std::pair<std::string, std::string>> {
    std::lock_guard lk(state_mu_);
    if (!refresh_due_) return std::nullopt;
    return std::pair{std::string(kStateAnnotation), progress_.annotation_value()};
  };
  rider.done = [this](bool applied) {
    std::lock_guard lk(state_mu_);
    if (applied) refresh_due_ = false;
  };
  return rider;
}

void ProgressReporter::post() {
  {
    std::lock_guard lk(writer_mu_);
    if (stopping_) return;
    ++asked_;
  }
  writer_cv_.notify_all();
}

void ProgressReporter::write_now() {
  {
    std::lock_guard lk(state_mu_);
    pending_ = false;
  }
  std::unique_lock lk(writer_mu_);
  if (stopping_) return;
  const std::uint64_t mine = ++asked_;
  writer_cv_.notify_all();
  writer_cv_.wait(lk, [&] { return done_ >= mine; });
}

void ProgressReporter::stop(PendingWrites pending) {
  if (pending == PendingWrites::kCancel) cancel_writes_.cancel();
  {
    std::unique_lock lk(writer_mu_);
    if (!writer_.joinable()) return;
    writer_cv_.wait(lk, [&] { return done_ >= asked_; });
    stopping_ = true;
  }
  writer_cv_.notify_all();
  writer_.join();
}

void ProgressReporter::write_loop() {
  std::unique_lock lk(writer_mu_);
  for (;;) {
    writer_cv_.wait(lk, [&] { return stopping_ || asked_ > started_; });
    if (asked_ == started_) return;  // stopping, nothing left
    started_ = asked_;               // the state written now is the newest: it answers every ask so far
    lk.unlock();
    write();
    lk.lock();
    done_ = started_;
    writer_cv_.notify_all();
  }
}

// One merge patch of the annotation (no resourceVersion: the value is ours alone); best effort - a run
// does not fail because its progress could not be shown.
void ProgressReporter::write() {
  const nlohmann::json body = {
      {"metadata", {{"annotations", {{std::string(kStateAnnotation), progress_.annotation_value()}}}}}};
  auto r = client_.patch(kube::paths::node(node_name_), kube::PatchType::kMerge, body);
  if (r) {
    known_.remember(*r);
    return;
  }
  if (!write_failed_) {
    spdlog::warn("Could not write the {} annotation on node {} (progress stays in the log only): {}",
                 kStateAnnotation, node_name_, r.error().message);
  } else {
    spdlog::debug("Could not write the {} annotation again: {}", kStateAnnotation, r.error().message);
  }
  write_failed_ = true;
}

}  // namespace dm::manager
