// The program section of a job spec: the user's own Python script run as every rank's worker, in
// place of the engine's (`ringmaster-node worker`), with torchrun's environment, reporting through
// the `ringmaster` Python package (python/). docs/program.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringmaster {

inline constexpr int64_t kMaxProgramArgs = 1024;

struct ProgramSpec {
  // The interpreter: a name looked up on each host's PATH, or a path there.
  std::string python = "python3";
  // Required: the script, relative to `workdir` or absolute.
  std::string script;
  std::vector<std::string> args;  // after the script, each passed as it is (never through a shell)
  // Where the script starts. A local run: relative to the directory `ringmaster run` started in
  // (empty: that directory). Over SSH: a path on each host (relative: to the remote home; empty:
  // the home), unless `upload`.
  std::string workdir;
  // Over SSH: copy the local `workdir` (its regular files) into the job's directory on each host
  // and start there. Ignored by a local run, whose workdir is already here.
  bool upload = false;
  // The optimizer steps the script will report, for the progress bar; 0: unknown.
  int64_t steps = 0;
  bool operator==(const ProgramSpec&) const = default;
};

}  // namespace ringmaster
