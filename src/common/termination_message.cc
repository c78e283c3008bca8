#include "common/termination_message.h"

#include <algorithm>
#include <fstream>

namespace dm {

std::string termination_message_path(const char* env_value) {
  if (env_value != nullptr && *env_value != '\0') return env_value;
  return "/dev/termination-log";
}

void write_termination_message(const std::string& path, std::string_view message) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return;
  out.write(message.data(), static_cast<std::streamsize>(std::min(message.size(), kMaxTerminationMessage)));
}

}  // namespace dm
