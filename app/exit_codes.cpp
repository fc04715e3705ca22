// Errors reported on stderr and mapped to exit codes.
#include "exit_codes.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#include <fmt/format.h>

#include "core/display_text.h"

namespace ringmaster {

int exitCodeFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSpec:
    case ErrorKind::kInvalidArgument:
      return kExitUsage;
    case ErrorKind::kUnavailable:
      return kExitUnavailable;
    default:
      return kExitFailed;
  }
}

int runReportingErrors(const std::function<int()>& command,
                       const std::function<int(ErrorKind)>& code_for) {
  try {
    return command();
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", displaySafe(e.message()));
    if (std::getenv("RINGMASTER_VERBOSE") != nullptr) fmt::print(stderr, "  at {}\n", e.where());
    return code_for(e.kind());
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", displaySafe(e.what()));
    return kExitFailed;
  }
}

}  // namespace ringmaster
