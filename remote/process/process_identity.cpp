// Process identities from /proc, and signals sent through a pidfd so that the process signalled
// is the one whose start time was checked.
#include "process/process_identity.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <fmt/format.h>

namespace ringmaster {

namespace {

// pidfd_open and pidfd_send_signal (Linux 5.3); -1 with errno ENOSYS on an older kernel.
int openPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

int sendThroughPidfd(int pidfd, int signo) {
#ifdef SYS_pidfd_send_signal
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signo, nullptr, 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

}  // namespace

const std::string& bootId() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string text;
    std::getline(in, text);
    return text;
  }();
  return id;
}

std::optional<ProcessStat> readProcessStat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  std::string text;
  try {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    text.assign(std::istreambuf_iterator<char>(in), {});
  } catch (const std::exception&) {
    return std::nullopt;  // the process ended while it was read (ESRCH)
  }
  // "PID (COMM) STATE PPID PGRP SESSION ... STARTTIME(22) ...": the name may hold spaces and
  // parentheses, so the fields are counted from its last ')'.
  const size_t name_end = text.rfind(')');
  if (name_end == std::string::npos || name_end + 2 >= text.size()) return std::nullopt;
  std::istringstream fields(text.substr(name_end + 2));
  ProcessStat stat;
  long long ppid = 0, group = 0, session = 0;
  if (!(fields >> stat.state >> ppid >> group >> session)) return std::nullopt;
  stat.session = static_cast<pid_t>(session);
  std::string skipped;
  for (int field = 7; field < 22; ++field)  // tty_nr (7) .. nice, num_threads, itrealvalue (21)
    if (!(fields >> skipped)) return std::nullopt;
  if (!(fields >> stat.start_time)) return std::nullopt;
  return stat;
}

std::optional<ProcessIdentity> processIdentity(pid_t pid) {
  const std::optional<ProcessStat> stat = readProcessStat(pid);
  if (!stat || stat->state == 'Z') return std::nullopt;
  return ProcessIdentity{.pid = pid, .start_time = stat->start_time, .boot_id = bootId()};
}

bool identityRuns(const ProcessIdentity& identity) {
  if (identity.boot_id != bootId()) return false;
  const std::optional<ProcessIdentity> now = processIdentity(identity.pid);
  return now && now->start_time == identity.start_time;
}

bool signalIdentity(const ProcessIdentity& identity, int signo) {
  const int pidfd = openPidfd(identity.pid);
  if (pidfd < 0 && errno != ENOSYS) return false;  // no such process
  const bool same = identityRuns(identity);
  bool sent = false;
  if (same)
    sent = pidfd >= 0 ? sendThroughPidfd(pidfd, signo) == 0 : ::kill(identity.pid, signo) == 0;
  if (pidfd >= 0) ::close(pidfd);
  return sent;
}

std::vector<ProcessIdentity> sessionIdentities(pid_t session) {
  std::vector<ProcessIdentity> members;
  if (session <= 0) return members;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    const std::optional<ProcessStat> stat = readProcessStat(pid);
    if (stat && stat->session == session && stat->state != 'Z')
      members.push_back({.pid = pid, .start_time = stat->start_time, .boot_id = bootId()});
  }
  return members;
}

}  // namespace ringmaster
