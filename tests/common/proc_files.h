// Reading /proc for tests that look for their processes: a process may end between listing
// /proc and reading its files, and libstdc++ then throws from the read (ESRCH), so a vanished
// process reads as empty instead.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ringmaster::testing {

// The PIDs listed in /proc now.
inline std::vector<pid_t> processIds() {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") == std::string::npos)
      pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

// /proc/PID/<file> ("cmdline", "stat", "comm"); "" once the process is gone.
inline std::string readProcFile(pid_t pid, const char* file) {
  try {
    std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace ringmaster::testing
