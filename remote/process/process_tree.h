// The processes a worker may leave behind, found through /proc: the live members of a process
// group or a session, and the children a subreaper adopted (orphans re-parented to it,
// PR_SET_CHILD_SUBREAPER), each named by PID and command line. Linux only; no cgroups, so a process
// that left its group with setsid is found only once it is an orphan of a subreaper.
#pragma once

#include <sys/types.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ringmaster {

struct ProcessInfo {
  pid_t pid = 0;
  std::string command;  // its command line on one line (controls as spaces), at most 200 bytes
  bool zombie = false;  // ended, waiting to be reaped by its parent
};

// The processes of process group `pgid`, zombies left out.
std::vector<ProcessInfo> processGroupMembers(pid_t pgid);

// This process's children other than `own` (the ones it started itself): with the subreaper flag
// set, the orphans it adopted. Zombies included (they are for the caller to reap).
std::vector<ProcessInfo> adoptedChildren(const std::set<pid_t>& own);

// "1234 (sleep 60), 1240 (python3 -c ...)".
std::string describeProcesses(const std::vector<ProcessInfo>& processes);

// The value of RANK in the environment of process `pid` (inherited from the worker that started
// it, unless it was cleared), when it can be read.
std::optional<int> rankInEnvironment(pid_t pid);

// The processes of session `sid`, zombies left out: the session leader and every process group
// started in it (a process that called setsid again has left it).
std::vector<ProcessInfo> sessionMembers(pid_t sid);

// Makes this process the subreaper of its descendants (orphans come to it, not to PID 1);
// returns whether the system allowed it.
bool becomeSubreaper();

}  // namespace ringmaster
