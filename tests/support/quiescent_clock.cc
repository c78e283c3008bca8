#include "support/quiescent_clock.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <string>

namespace dm::test {

namespace {

constexpr auto kLook = std::chrono::microseconds(250);       // how often the advancer looks
constexpr auto kCancelPoll = std::chrono::milliseconds(5);   // a cancel token is read this often
constexpr auto kMissedWake = std::chrono::milliseconds(20);  // a notification lost in a race costs this much

// Every thread of the process but `self` is asleep (S) in the kernel's eyes. A thread running or ready to
// run (R), or in an uninterruptible wait (D: I/O under way), is not.
bool others_asleep(pid_t self) {
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const std::string tid = task.path().filename();
    if (tid == std::to_string(self)) continue;
    // read(2), not a stream: a thread that ends meanwhile makes the read fail (ESRCH), which is no error
    // here.
    const int fd = ::open((task.path() / "stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    std::array<char, 512> buf{};
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    ::close(fd);
    if (n <= 0) continue;
    const std::string stat(buf.data(), static_cast<size_t>(n));
    const auto paren = stat.rfind(')');  // the name may hold spaces and parentheses
    if (paren == std::string::npos || paren + 2 >= stat.size()) continue;  // the thread has just ended
    const char state = stat[paren + 2];
    if (state == 'R' || state == 'D') return false;
  }
  return !ec;
}

}  // namespace

QuiescentClock::QuiescentClock()
    : wall_start_(std::chrono::system_clock::now()), advancer_([this] { advance_loop(); }) {}

QuiescentClock::~QuiescentClock() {
  stop_ = true;
  advancer_.join();
}

TimePoint QuiescentClock::now() const {
  return TimePoint(Duration(now_.load()));
}

std::chrono::system_clock::time_point QuiescentClock::wall_now() const {
  return wall_start_ +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(now().time_since_epoch());
}

std::list<QuiescentClock::Waiter>::iterator QuiescentClock::enter(TimePoint wake,
                                                                  std::condition_variable* cv) const {
  const std::lock_guard lk(mu_);
  return waiters_.insert(waiters_.end(), Waiter{wake, cv});
}

void QuiescentClock::leave(std::list<Waiter>::iterator it) const {
  const std::lock_guard lk(mu_);
  waiters_.erase(it);
}

bool QuiescentClock::sleep_for(Duration d, const CancelToken& cancel) const {
  if (cancel.cancelled()) return false;
  const auto wake = now() + std::min(d, cancel.deadline().remaining(*this));
  const auto it = enter(wake, &moved_);
  {
    std::unique_lock lk(mu_);
    while (now() < wake && !cancel.cancelled()) moved_.wait_for(lk, kCancelPoll);
  }
  leave(it);
  return !cancel.cancelled();
}

bool QuiescentClock::wait_for(std::unique_lock<std::mutex>& lk, std::condition_variable& cv, Duration d,
                              const std::function<bool()>& ready) const {
  if (ready()) return true;
  const auto wake = now() + d;
  const auto it = enter(wake, &cv);
  while (!ready() && now() < wake) cv.wait_for(lk, kMissedWake);
  leave(it);
  return ready();
}

void QuiescentClock::advance_loop() {
  const auto self = static_cast<pid_t>(syscall(SYS_gettid));
  while (!stop_) {
    std::this_thread::sleep_for(kLook);
    {
      const std::lock_guard lk(mu_);
      if (waiters_.empty()) continue;
    }
    // Twice, a look apart: a thread woken just as the first look passed it is seen by the second.
    if (!others_asleep(self)) continue;
    std::this_thread::sleep_for(kLook);
    if (!others_asleep(self)) continue;
    std::vector<std::condition_variable*> to_wake;
    {
      const std::lock_guard lk(mu_);
      if (waiters_.empty()) continue;
      const auto soonest =
          std::min_element(waiters_.begin(), waiters_.end(), [](const Waiter& a, const Waiter& b) {
            return a.wake < b.wake;
          })->wake;
      if (soonest > now()) {
        now_ = soonest.time_since_epoch().count();
        ++moves_;
      }
      for (const auto& w : waiters_)
        if (w.wake <= soonest) to_wake.push_back(w.cv);
    }
    moved_.notify_all();
    for (auto* cv : to_wake) cv->notify_all();
  }
}

}  // namespace dm::test
