// The exit codes of Ringmaster's programs and the one place where an error becomes one: the
// message on stderr ("error: ...", and where it was raised with RINGMASTER_VERBOSE), then the
// code for its kind (docs/errors.md).
#pragma once

#include <functional>

#include "core/error.h"

namespace ringmaster {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,
  kExitUsage = 2,
  kExitUnavailable = 3,
  kExitBusy = 4,  // ringmaster: the run database stayed locked by another process
  kExitCancelled = 130,
};

// 2 for a bad spec or argument, 3 for something unavailable, 1 otherwise.
int exitCodeFor(ErrorKind kind);

// Runs `command` and returns its exit code; an Error is reported and mapped by `code_for`, any
// other exception reported as a failure.
int runReportingErrors(const std::function<int()>& command,
                       const std::function<int(ErrorKind)>& code_for = exitCodeFor);

}  // namespace ringmaster
