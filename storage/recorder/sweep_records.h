// What a sweep's driver writes about its sweep (issue 37): the sweep and its planned members, each
// member's run as it starts (or why it could not), the driver process a detached sweep runs in,
// and the sweep's end. The readers are in query/sweeps.h.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ringmaster::storage {

class Database;

struct NewSweep {
  std::string name;       // shown in lists; the spec file's stem unless the user named it
  std::string spec_path;  // the base spec's file, as given
  std::string spec_json;  // the base spec as given, before any member's overrides
  // How the members were drawn, as JSON: {"method": "grid" | "random", "axes": [{"field": ..,
  // "values": [..]} | {"field": .., "distribution": "uniform" | "log_uniform" | "int_uniform",
  // "min": .., "max": ..}], "count": N, "seed": S}.
  std::string plan_json;
  int parallel = 1;  // members run at once
  // Each member's overrides in plan order, as a JSON object of dotted spec field to value:
  // {"optimizer.lr": 0.001, "train.micro_batches": 4}.
  std::vector<std::string> member_overrides_json;
  double created_at = 0;
  bool detached = false;  // its driver runs without a terminal (ringmaster sweep --detach)
};

// Creates the sweep `running` with every member `planned`; returns its id. kInvalidArgument for
// no members or a parallel below 1.
int64_t createSweep(Database& db, const NewSweep& sweep);

// The process that starts the sweep's members (for attach / cancel --sweep and for finding a
// sweep whose driver died): its PID, its start time (clock ticks since boot, /proc/PID/stat field
// 22), the boot id and the host name.
struct SweepDriver {
  int64_t pid = 0;
  int64_t start_time = 0;
  std::string boot_id;
  std::string host;
};
void recordSweepDriver(Database& db, int64_t sweep_id, const SweepDriver& driver);

// A member's run was created: the member is `started` and belongs to run `run_id`.
void recordSweepMemberStarted(Database& db, int64_t sweep_id, int position, int64_t run_id);
// A member's spec was refused before a run existed (a value the spec does not allow): `refused`,
// with the error as the spec check gave it.
void recordSweepMemberRefused(Database& db, int64_t sweep_id, int position,
                              const std::string& error);
// Every member still `planned` becomes `not_started` (the sweep was cancelled); returns how many.
int recordSweepMembersNotStarted(Database& db, int64_t sweep_id);
// The sweep ended: `completed` (every member ran or was refused, whatever their runs' outcomes),
// `cancelled` or `failed` (the driver could not go on: its output says why). Only a
// `running` sweep changes.
void finishSweep(Database& db, int64_t sweep_id, const std::string& status, double ended_at);

// Sweeps `running` whose driver on this host is gone (a killed driver) become `interrupted`, their
// planned members `not_started`; returns their ids. `driver_runs` says whether a recorded driver
// still runs (remote/process: identityRuns), and true for one it cannot judge (another host's);
// a running sweep with no driver recorded yet is left alone.
// Reading commands call it as they do reconcileInterruptedRuns.
std::vector<int64_t> reconcileInterruptedSweeps(
    Database& db, double now, const std::function<bool(const SweepDriver&)>& driver_runs);

}  // namespace ringmaster::storage
