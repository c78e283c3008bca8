// Errors as values: Result<T> holds a T or an Error; Status is Result<void>.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace dm {

// One entry of a Kubernetes Status's details.causes: a machine-readable type (e.g. "DisruptionBudget" on a
// refused eviction, "NamespaceTerminating" on a write into a namespace being deleted), its message, and the
// field it concerns, if any.
struct StatusCause {
  std::string type;
  std::string message;
  std::string field;
};

// What failed, said so that an operator can act on it. Kubernetes errors also carry the HTTP status, the
// API's machine-readable reason (NotFound, Forbidden, Conflict, TooManyRequests, ...) and causes; host errors
// carry the errno of the system call that failed (or that the host layer answers as the kernel would):
// callers classify on those, never on the message text, which is for people.
struct Error {
  static Error cancellation(std::string msg) {
    return Error(std::move(msg), 0, std::string(kCancelledReason));
  }
  // A host error caused by `err`: "<what>: <strerror(err)>", the errno kept for callers to test.
  static Error from_errno(int err, const std::string& what) {
    return with_errno(err, what + ": " + std::strerror(err));
  }
  // A host error whose cause is `err` and whose message says it in its own words.
  static Error with_errno(int err, std::string msg) {
    Error e(std::move(msg));
    e.sys_errno = err;
    return e;
  }

  std::string message;
  int http_status = 0;              // 0 when the error did not come from an HTTP response
  std::string reason;               // Kubernetes Status.reason, if any
  std::vector<StatusCause> causes;  // Kubernetes Status.details.causes, if any
  int sys_errno = 0;                // a host error's errno (ENOENT, EBUSY, EPERM, ...); 0 when none
  // The API server did not answer (no response, 5xx, 429) until the deadline of what the request served,
  // which was tried again until then: trying it again at once is pointless.
  bool unanswered = false;

  Error() = default;
  explicit Error(std::string msg, int status = 0, std::string why = {})
      : message(std::move(msg)), http_status(status), reason(std::move(why)) {}

  // Prefixes the message with context, Go-style: "context: message".
  [[nodiscard]] Error wrap(const std::string& context) const {
    Error e = *this;
    e.message = context + ": " + message;
    return e;
  }
  [[nodiscard]] bool not_found() const { return http_status == 404; }
  [[nodiscard]] bool forbidden() const { return http_status == 403; }
  [[nodiscard]] bool conflict() const { return http_status == 409; }
  [[nodiscard]] bool too_many_requests() const { return http_status == 429; }
  [[nodiscard]] bool gone() const { return http_status == 410; }
  [[nodiscard]] bool unauthorized() const { return http_status == 401; }
  // A request or wait stopped by a cancel token (SIGTERM, a deadline's watchdog), not by the server.
  [[nodiscard]] bool cancelled() const { return reason == kCancelledReason; }
  static constexpr std::string_view kCancelledReason = "Cancelled";
  // A host error caused by errno `err`.
  [[nodiscard]] bool errno_is(int err) const { return sys_errno != 0 && sys_errno == err; }
  [[nodiscard]] bool has_cause(std::string_view type) const {
    return std::any_of(causes.begin(), causes.end(), [&](const StatusCause& c) { return c.type == type; });
  }
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }

  [[nodiscard]] const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  [[nodiscard]] const Error& error() const { return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() {
  return {};
}

}  // namespace dm
