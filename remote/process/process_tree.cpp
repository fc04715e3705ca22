// One pass over /proc per question: each process's stat line gives its state, parent and group.
#include "process/process_tree.h"

#include <dirent.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string_view>

#include <fmt/format.h>

namespace ringmaster {
namespace {

constexpr size_t kMaxCommandBytes = 200;

struct ProcStat {
  pid_t pid = 0;
  char state = '?';
  pid_t parent = 0;
  pid_t group = 0;
  pid_t session = 0;
};

std::string fileText(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  std::string text(limit, '\0');
  in.read(text.data(), static_cast<std::streamsize>(limit));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::optional<ProcStat> readStat(pid_t pid) {
  const std::string text = fileText(fmt::format("/proc/{}/stat", pid), 4096);
  const size_t name_end = text.rfind(')');  // the command name may hold spaces and parentheses
  if (name_end == std::string::npos || name_end + 2 >= text.size()) return std::nullopt;
  ProcStat stat{.pid = pid, .state = text[name_end + 2]};
  char* end = nullptr;
  stat.parent = static_cast<pid_t>(std::strtol(text.c_str() + name_end + 3, &end, 10));
  stat.group = static_cast<pid_t>(std::strtol(end, &end, 10));
  stat.session = static_cast<pid_t>(std::strtol(end, nullptr, 10));
  return stat;
}

std::string commandLine(pid_t pid) {
  std::string text = fileText(fmt::format("/proc/{}/cmdline", pid), kMaxCommandBytes);
  while (!text.empty() && text.back() == '\0') text.pop_back();
  // One line: the arguments' separators and any line break or other control in them are spaces.
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (text.empty()) {  // a kernel thread or a zombie: its name
    text = fileText(fmt::format("/proc/{}/comm", pid), 64);
    if (!text.empty() && text.back() == '\n') text.pop_back();
  }
  return text;
}

// Every process whose stat line `wanted` accepts.
std::vector<ProcessInfo> processesWhere(const std::function<bool(const ProcStat&)>& wanted) {
  std::vector<ProcessInfo> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    const std::optional<ProcStat> stat = readStat(static_cast<pid_t>(pid));
    if (!stat || !wanted(*stat)) continue;
    found.push_back(
        {.pid = stat->pid, .command = commandLine(stat->pid), .zombie = stat->state == 'Z'});
  }
  ::closedir(proc);
  return found;
}

}  // namespace

std::vector<ProcessInfo> processGroupMembers(pid_t pgid) {
  return processesWhere(
      [pgid](const ProcStat& stat) { return stat.group == pgid && stat.state != 'Z'; });
}

std::vector<ProcessInfo> sessionMembers(pid_t sid) {
  return processesWhere(
      [sid](const ProcStat& stat) { return stat.session == sid && stat.state != 'Z'; });
}

std::vector<ProcessInfo> adoptedChildren(const std::set<pid_t>& own) {
  const pid_t self = ::getpid();
  return processesWhere(
      [&](const ProcStat& stat) { return stat.parent == self && !own.contains(stat.pid); });
}

std::string describeProcesses(const std::vector<ProcessInfo>& processes) {
  std::string text;
  for (const ProcessInfo& process : processes) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} ({})", process.pid, process.command);
  }
  return text;
}

std::optional<int> rankInEnvironment(pid_t pid) {
  const std::string environment = fileText(fmt::format("/proc/{}/environ", pid), 1 << 20);
  size_t at = 0;
  while (at < environment.size()) {
    const size_t end = std::min(environment.find('\0', at), environment.size());
    const std::string_view entry(environment.data() + at, end - at);
    if (entry.starts_with("RANK=")) {
      char* rest = nullptr;
      const std::string value(entry.substr(5));
      const long rank = std::strtol(value.c_str(), &rest, 10);
      if (!value.empty() && *rest == '\0' && rank >= 0 && rank < (1L << 31))
        return static_cast<int>(rank);
      return std::nullopt;
    }
    at = end + 1;
  }
  return std::nullopt;
}

bool becomeSubreaper() {
  return ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
}

}  // namespace ringmaster
