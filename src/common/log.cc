#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <ctime>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

namespace dm {
namespace {

// Keeps the message of the last fatal (critical) record.
class LastFatalSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string last() {
    const std::lock_guard lock(mutex_);
    return last_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level == spdlog::level::critical) last_.assign(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::string last_;
};

std::shared_ptr<LastFatalSink>& last_fatal_sink() {
  static auto sink = std::make_shared<LastFatalSink>();
  return sink;
}

std::string_view logrus_level(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
      return "trace";
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warning";
    case spdlog::level::err:
      return "error";
    case spdlog::level::critical:
      return "fatal";
    default:
      return "info";
  }
}

class LogrusFormatter final : public spdlog::formatter {
 public:
  explicit LogrusFormatter(LogFormat f) : format_(f) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string line = format_log_line(format_, logrus_level(msg.level), rfc3339(msg.time),
                                             std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
  }
  [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LogrusFormatter>(format_);
  }

 private:
  LogFormat format_;
};

}  // namespace

Result<LogFormat> parse_log_format(std::string_view s) {
  if (s == "text") return LogFormat::kText;
  if (s == "json") return LogFormat::kJson;
  return Error("invalid log format \"" + std::string(s) + "\" (want text or json)");
}

Result<std::string> parse_log_level(std::string_view s) {
  std::string l(s);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "warn") return std::string("warning");
  for (const char* name : {"panic", "fatal", "error", "warning", "info", "debug", "trace"}) {
    if (l == name) return l;
  }
  return Error("invalid log level \"" + std::string(s) +
               "\" (want panic, fatal, error, warning, info, debug or trace)");
}

std::string rfc3339(std::chrono::system_clock::time_point tp) {
  const std::time_t t = std::chrono::system_clock::to_time_t(tp);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string format_log_line(LogFormat format, std::string_view level, std::string_view time_rfc3339,
                            std::string_view msg) {
  if (format == LogFormat::kJson) {
    nlohmann::json j = {{"level", level}, {"msg", msg}, {"time", time_rfc3339}};
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  std::string out;
  out.reserve(msg.size() + 64);
  out.append("time=").append(time_rfc3339).append(" level=").append(level).append(" msg=").append(msg);
  out.push_back('\n');
  return out;
}

void setup_logging(LogFormat format, std::string_view level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger =
      std::make_shared<spdlog::logger>("driver-manager", spdlog::sinks_init_list{sink, last_fatal_sink()});
  logger->set_formatter(std::make_unique<LogrusFormatter>(format));
  spdlog::level::level_enum l = spdlog::level::info;
  const auto name = parse_log_level(level);
  const std::string canonical = name ? *name : "info";
  if (canonical == "trace") {
    l = spdlog::level::trace;
  } else if (canonical == "debug") {
    l = spdlog::level::debug;
  } else if (canonical == "warning") {
    l = spdlog::level::warn;
  } else if (canonical == "error") {
    l = spdlog::level::err;
  } else if (canonical == "fatal" || canonical == "panic") {
    l = spdlog::level::critical;
  }
  logger->set_level(l);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

std::string last_fatal_message() {
  return last_fatal_sink()->last();
}

}  // namespace dm
