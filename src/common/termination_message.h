// The container's termination message: the one line a failed run leaves for `kubectl describe pod` and
// the GPU Operator (the kubelet reads the file at terminationMessagePath when the container ends).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dm {

// What the kubelet reads of the file at most.
constexpr size_t kMaxTerminationMessage = 4096;

// TERMINATION_MESSAGE_PATH when it is set and not empty (`env_value`, null when unset), else the
// kubelet's default /dev/termination-log.
std::string termination_message_path(const char* env_value);

// Writes `message` (cut to kMaxTerminationMessage bytes) to `path`, replacing what it held. A path that
// cannot be opened (not in a pod) is skipped without a word: the log has the same line.
void write_termination_message(const std::string& path, std::string_view message);

}  // namespace dm
