// A sweep's records as its driver writes them (recorder/sweep_records.h): the sweep with its
// planned members in one transaction, then each member's state and the sweep's end.
#include "recorder/sweep_records.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include "core/error.h"
#include "db/database.h"
#include "db/statement.h"

namespace ringmaster::storage {

namespace {

// Changes one member from `planned`; kInvalidArgument for a member that is not planned.
void leavePlanned(Database& db, int64_t sweep_id, int position, const std::string& state,
                  std::optional<int64_t> run_id, const std::optional<std::string>& error) {
  Statement update(db,
                   "UPDATE sweep_members SET state = ?, run = ?, error = ? WHERE sweep_id = ? AND "
                   "position = ? AND state = 'planned'");
  update.bind(1, state).bind(2, run_id).bind(3, error).bind(4, sweep_id).bind(5, position).run();
  if (sqlite3_changes(db.handle()) != 1)
    RM_THROW(kInvalidArgument,
             fmt::format("sweep {} has no planned member {} in {}", sweep_id, position, db.path()));
}

}  // namespace

int64_t createSweep(Database& db, const NewSweep& sweep) {
  if (sweep.member_overrides_json.empty())
    RM_THROW(kInvalidArgument, fmt::format("sweep '{}' has no members", sweep.name));
  if (sweep.parallel < 1)
    RM_THROW(kInvalidArgument,
             fmt::format("sweep '{}': parallel is {}, at least 1", sweep.name, sweep.parallel));
  int64_t id = 0;
  db.transaction([&] {
    Statement insert(db,
                     "INSERT INTO sweeps (name, spec_path, spec, plan, parallel, status, "
                     "created_at, detached) VALUES (?, ?, ?, ?, ?, 'running', ?, ?)");
    insert.bind(1, sweep.name).bind(2, sweep.spec_path).bind(3, sweep.spec_json);
    insert.bind(4, sweep.plan_json).bind(5, sweep.parallel).bind(6, sweep.created_at);
    insert.bind(7, sweep.detached ? 1 : 0).run();
    id = sqlite3_last_insert_rowid(db.handle());
    Statement member(db,
                     "INSERT INTO sweep_members (sweep_id, position, overrides, state) "
                     "VALUES (?, ?, ?, 'planned')");
    for (size_t position = 0; position < sweep.member_overrides_json.size(); ++position) {
      member.bind(1, id).bind(2, static_cast<int64_t>(position));
      member.bind(3, sweep.member_overrides_json[position]).run();
    }
  });
  return id;
}

void recordSweepDriver(Database& db, int64_t sweep_id, const SweepDriver& driver) {
  Statement update(db,
                   "UPDATE sweeps SET driver_pid = ?, driver_start_time = ?, driver_boot_id = ?, "
                   "driver_host = ? WHERE id = ?");
  update.bind(1, driver.pid).bind(2, driver.start_time).bind(3, driver.boot_id);
  update.bind(4, driver.host).bind(5, sweep_id).run();
}

void recordSweepMemberStarted(Database& db, int64_t sweep_id, int position, int64_t run_id) {
  leavePlanned(db, sweep_id, position, "started", run_id, std::nullopt);
}

void recordSweepMemberRefused(Database& db, int64_t sweep_id, int position,
                              const std::string& error) {
  leavePlanned(db, sweep_id, position, "refused", std::nullopt, error);
}

int recordSweepMembersNotStarted(Database& db, int64_t sweep_id) {
  Statement update(db,
                   "UPDATE sweep_members SET state = 'not_started' WHERE sweep_id = ? AND "
                   "state = 'planned'");
  update.bind(1, sweep_id).run();
  return static_cast<int>(sqlite3_changes(db.handle()));
}

void finishSweep(Database& db, int64_t sweep_id, const std::string& status, double ended_at) {
  if (status != "completed" && status != "cancelled" && status != "failed" &&
      status != "interrupted")
    RM_THROW(kInternal, fmt::format("sweep {}: no sweep status '{}'", sweep_id, status));
  Statement update(db,
                   "UPDATE sweeps SET status = ?, ended_at = ? WHERE id = ? AND status = "
                   "'running'");
  update.bind(1, status).bind(2, ended_at).bind(3, sweep_id).run();
}

std::vector<int64_t> reconcileInterruptedSweeps(
    Database& db, double now, const std::function<bool(const SweepDriver&)>& driver_runs) {
  std::vector<int64_t> interrupted;
  {
    Statement running(db,
                      "SELECT id, driver_pid, driver_start_time, driver_boot_id, driver_host FROM "
                      "sweeps WHERE status = 'running' AND driver_pid IS NOT NULL");
    while (running.run()) {
      const SweepDriver driver{.pid = running.columnInt(1),
                               .start_time = running.columnInt(2),
                               .boot_id = running.columnText(3),
                               .host = running.columnText(4)};
      if (!driver_runs(driver)) interrupted.push_back(running.columnInt(0));
    }
  }
  for (int64_t id : interrupted) {
    db.transaction([&] {
      recordSweepMembersNotStarted(db, id);
      finishSweep(db, id, "interrupted", now);
    });
  }
  return interrupted;
}

}  // namespace ringmaster::storage
