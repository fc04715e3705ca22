// A process known by its PID and its start time (/proc/PID/stat field 22) in one boot of this
// machine, so that a PID the kernel has since given to another process (or, after a restart or on
// another machine, any process) is never taken for it nor signalled; and the
// session a process belongs to (field 6), the group a detached job's processes share. Linux only.
// Nothing here starts or reaps a process: that is ChildProcess.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster {

// A process as recorded when it ran: its PID, when it started (clock ticks since boot) and that
// boot (/proc/sys/kernel/random/boot_id: a start time means nothing in another boot).
struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_time = 0;
  std::string boot_id;
};

// This boot of this machine ("" where the kernel does not say).
const std::string& bootId();

// What /proc/PID/stat says of a process: its state letter, session and start time.
struct ProcessStat {
  char state = '?';  // 'R', 'S', 'Z' (ended, not yet reaped), ...
  pid_t session = 0;
  uint64_t start_time = 0;
};

// nullopt when there is no process `pid` (or its stat cannot be read).
std::optional<ProcessStat> readProcessStat(pid_t pid);
// The identity of process `pid` now; nullopt when it does not run.
std::optional<ProcessIdentity> processIdentity(pid_t pid);
// Whether the process `identity` names still runs: this is its boot, its PID runs (not a zombie)
// and started when it was recorded to.
bool identityRuns(const ProcessIdentity& identity);
// Sends `signo` to the process `identity` names, and to no other: the PID is pinned (pidfd) before
// its start time is checked, so a PID reused in between is never signalled. False when that
// process no longer runs.
bool signalIdentity(const ProcessIdentity& identity, int signo);
// The processes of session `session` that run (zombies left out), this one excepted.
std::vector<ProcessIdentity> sessionIdentities(pid_t session);

}  // namespace ringmaster
