#include <beehive/logger.hpp>

#include <cstdio>
#include <mutex>

namespace beehive {

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warning:
      return "warning";
    case LogLevel::error:
      return "error";
  }
  return "info";
}

Logger stderr_logger(LogLevel min) {
  return [min](LogLevel level, std::string_view message, const LogFields& fields) {
    if (level < min) return;
    std::string line = "beehive: ";
    line.append(message);
    for (auto& [k, v] : fields) line.append(" ").append(k).append("=").append(v);
    line += "\n";
    static std::mutex mu;  // whole lines, even from several threads
    std::lock_guard lk(mu);
    std::fputs(line.c_str(), stderr);
  };
}

}  // namespace beehive
