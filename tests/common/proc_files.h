// Reading /proc for tests that look for their processes: a process may end between listing
// /proc and reading its files, and libstdc++ then throws from the read (ESRCH), so a vanished
// process reads as empty instead. Also the PID files a detached job leaves, and the processes of
// the runs a test started, found by their command lines.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
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

// Whether process `pid` runs: a zombie (ended, its parent has not reaped it yet) runs nothing.
inline bool processRuns(pid_t pid) {
  const std::string stat = readProcFile(pid, "stat");
  const size_t name_end = stat.rfind(')');
  return name_end != std::string::npos && name_end + 2 < stat.size() && stat[name_end + 2] != 'Z';
}

// The PIDs a PID file lists (agent.pid, workers.pid), whitespace-separated; none if it is absent.
inline std::vector<pid_t> pidsInFile(const std::filesystem::path& file) {
  std::vector<pid_t> pids;
  std::ifstream in(file);
  for (long pid = 0; in >> pid;) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// PIDs of the processes other than this one whose command line names a run directory below
// `dir` (`ringmaster run` keeps each run's spec in DB-runs/run-N beside the database, and the
// agent and workers read it from there): the processes of the runs a test started under `dir`.
inline std::vector<pid_t> processesOfRunsUnder(const std::filesystem::path& dir) {
  std::vector<pid_t> found;
  for (const pid_t pid : processIds()) {
    const std::string text = readProcFile(pid, "cmdline");
    if (pid != ::getpid() && text.find(dir.string() + "/") != std::string::npos &&
        text.find("-runs/run-") != std::string::npos)
      found.push_back(pid);
  }
  return found;
}

// Waits (bounded by `limit`) until no process of the runs under `dir` is left; true when none is.
inline bool noProcessOfRunsLeftUnder(const std::filesystem::path& dir,
                                     std::chrono::seconds limit = std::chrono::seconds(15)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!processesOfRunsUnder(dir).empty()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace ringmaster::testing
