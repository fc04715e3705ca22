// Sweeps read back (query/sweeps.h): the sweeps table with each sweep's members, a member's run
// status and root cause joined from runs.
#include "query/sweeps.h"

#include <fmt/format.h>

#include "core/error.h"
#include "db/database.h"
#include "db/statement.h"

namespace ringmaster::storage {

namespace {

constexpr const char* kSweepColumns =
    "id, name, spec_path, spec, plan, parallel, status, created_at, ended_at, detached, "
    "driver_pid, driver_start_time, driver_boot_id, driver_host";

SweepRecord sweepFrom(const Statement& row) {
  SweepRecord sweep;
  sweep.id = row.columnInt(0);
  sweep.name = row.columnText(1);
  sweep.spec_path = row.columnText(2);
  sweep.spec_json = row.columnText(3);
  sweep.plan_json = row.columnText(4);
  sweep.parallel = static_cast<int>(row.columnInt(5));
  sweep.status = row.columnText(6);
  sweep.created_at = row.columnDouble(7);
  sweep.ended_at = row.optionalDouble(8);
  sweep.detached = row.columnInt(9) != 0;
  sweep.driver_pid = row.optionalInt(10);
  sweep.driver_start_time = row.optionalInt(11);
  sweep.driver_boot_id = row.columnText(12);
  sweep.driver_host = row.columnText(13);
  return sweep;
}

std::vector<SweepMember> loadMembers(const Database& db, int64_t sweep_id) {
  Statement select(db,
                   "SELECT m.position, m.overrides, m.state, m.run, r.status, "
                   "coalesce(m.error, r.error) FROM sweep_members m LEFT JOIN runs r ON r.id = "
                   "m.run WHERE m.sweep_id = ? ORDER BY m.position");
  select.bind(1, sweep_id);
  std::vector<SweepMember> members;
  while (select.run()) {
    members.push_back({.position = static_cast<int>(select.columnInt(0)),
                       .overrides_json = select.columnText(1),
                       .state = select.columnText(2),
                       .run_id = select.optionalInt(3),
                       .run_status = select.columnText(4),
                       .error = select.optionalText(5)});
  }
  return members;
}

bool runEnded(const std::string& status) {
  return status == "completed" || status == "failed" || status == "cancelled" ||
         status == "interrupted";
}

}  // namespace

int SweepRecord::membersEnded() const {
  int ended = 0;
  for (const SweepMember& member : members)
    ended += member.state == "refused" || member.state == "not_started" ||
             (member.state == "started" && (!member.run_id || runEnded(member.run_status)));
  return ended;
}

std::vector<SweepRecord> listSweeps(const Database& db) {
  Statement select(db, fmt::format("SELECT {} FROM sweeps ORDER BY id DESC", kSweepColumns));
  std::vector<SweepRecord> sweeps;
  while (select.run()) sweeps.push_back(sweepFrom(select));
  for (SweepRecord& sweep : sweeps) sweep.members = loadMembers(db, sweep.id);
  return sweeps;
}

SweepRecord loadSweep(const Database& db, int64_t sweep_id) {
  Statement select(db, fmt::format("SELECT {} FROM sweeps WHERE id = ?", kSweepColumns));
  select.bind(1, sweep_id);
  if (!select.run())
    RM_THROW(kInvalidArgument, fmt::format("no sweep {} in {}", sweep_id, db.path()));
  SweepRecord sweep = sweepFrom(select);
  select.reset();
  sweep.members = loadMembers(db, sweep_id);
  return sweep;
}

std::optional<SweepMembership> sweepOfRun(const Database& db, int64_t run_id) {
  Statement select(db, "SELECT sweep_id, position FROM sweep_members WHERE run = ?");
  select.bind(1, run_id);
  if (!select.run()) return std::nullopt;
  SweepMembership membership{.sweep_id = select.columnInt(0),
                             .position = static_cast<int>(select.columnInt(1))};
  select.reset();
  return membership;
}

}  // namespace ringmaster::storage
