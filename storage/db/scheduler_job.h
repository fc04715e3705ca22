// A run handed to a cluster scheduler (issue 35): which one, the job's id there, and the scheduler's
// own word for the job's state and why (Slurm's PENDING and Resources), kept beside the run's
// status.
#pragma once

#include <string>

namespace ringmaster::storage {

struct SchedulerJob {
  std::string kind;    // "slurm"
  std::string job_id;  // "4242"
  std::string state;   // Slurm's word: PENDING, RUNNING, COMPLETED, TIMEOUT, NODE_FAIL, ...
  std::string reason;  // why it waits or ended (Resources, Priority, ...); empty for none
  std::string nodes;   // the allocated nodes ("n[1-2]"); empty while pending
  bool operator==(const SchedulerJob&) const = default;
};

}  // namespace ringmaster::storage
