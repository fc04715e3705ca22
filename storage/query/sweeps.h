// Sweeps read back (issue 37): each sweep with its members in plan order, a member's overrides,
// state, run and that run's status; and the sweep a run belongs to. Written by
// recorder/sweep_records.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster::storage {

class Database;

struct SweepMember {
  int position = 0;               // 0-based, in plan order
  std::string overrides_json;     // {"optimizer.lr": 0.001, ...}
  std::string state;              // planned, started, refused, not_started
  std::optional<int64_t> run_id;  // started: its run (none again once that run is deleted)
  std::string run_status;         // the run's status (running, completed, failed, ...); "" for none
  std::optional<std::string> error;  // refused: why; a failed run: its root cause
};

struct SweepRecord {
  int64_t id = 0;
  std::string name;
  std::string spec_path;
  std::string spec_json;
  std::string plan_json;  // recorder/sweep_records.h NewSweep::plan_json
  int parallel = 1;
  std::string status;  // running, completed, cancelled, failed, interrupted
  double created_at = 0;
  std::optional<double> ended_at;
  bool detached = false;
  std::optional<int64_t> driver_pid;
  std::optional<int64_t> driver_start_time;
  std::string driver_boot_id, driver_host;
  std::vector<SweepMember> members;

  // Members whose runs ended (any outcome) or that were refused or not started.
  int membersEnded() const;
};

// Every sweep, newest first, members included.
std::vector<SweepRecord> listSweeps(const Database& db);
// kInvalidArgument naming the database for no such sweep.
SweepRecord loadSweep(const Database& db, int64_t sweep_id);
// The sweep (and the member's position) a run was started for; nullopt for a run of no sweep.
struct SweepMembership {
  int64_t sweep_id = 0;
  int position = 0;
};
std::optional<SweepMembership> sweepOfRun(const Database& db, int64_t run_id);

}  // namespace ringmaster::storage
