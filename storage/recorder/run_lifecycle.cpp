// Creating, finishing and reconciling runs, their root cause and hosts: single statements and
// short transactions on the caller's connection.
#include "recorder/run_lifecycle.h"

#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <fmt/format.h>

#include "core/error.h"
#include "core/host_name.h"
#include "db/database.h"
#include "db/statement.h"

namespace ringmaster::storage {

namespace {

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

MeshAxes legacyRunMesh(const std::string& strategy, int world_size) {
  if (strategy == "pipeline") return {.dp = 1, .tp = 1, .pp = world_size};
  return {.dp = world_size, .tp = 1, .pp = 1};
}

int64_t createRun(Database& db, const NewRun& run) {
  const MeshAxes mesh = run.mesh.value_or(legacyRunMesh(run.strategy, run.world_size));
  RM_CHECK_ARG(mesh.dp >= 1 && mesh.tp >= 1 && mesh.pp >= 1 &&
                   int64_t{mesh.dp} * mesh.tp * mesh.pp == run.world_size,
               fmt::format("run {}: its mesh dp {} x tp {} x pp {} is not its world size {}",
                           run.name, mesh.dp, mesh.tp, mesh.pp, run.world_size));
  const double now = nowSeconds();
  int64_t id = 0;
  db.transaction([&] {
    Statement insert(db,
                     "INSERT INTO runs (id, name, spec, strategy, world_size, status, "
                     "created_at, started_at, recorder_pid, recorder_host, mesh_dp, mesh_tp, "
                     "mesh_pp) VALUES (max(coalesce((SELECT max(id) FROM runs), 0), coalesce(("
                     "SELECT max(last_id) FROM run_ids_retired), 0)) + 1, ?, ?, ?, ?, 'running', "
                     "?, ?, ?, ?, ?, ?, ?)");
    insert.bind(1, run.name).bind(2, run.spec_json).bind(3, run.strategy);
    insert.bind(4, int64_t{run.world_size}).bind(5, now).bind(6, now);
    insert.bind(7, static_cast<int64_t>(getpid())).bind(8, thisHostName());
    insert.bind(9, int64_t{mesh.dp}).bind(10, int64_t{mesh.tp}).bind(11, int64_t{mesh.pp}).run();
    id = sqlite3_last_insert_rowid(db.handle());
    Statement attempt(db, "INSERT INTO attempts (run_id, attempt, started_at) VALUES (?, 0, ?)");
    attempt.bind(1, id).bind(2, now).run();
  });
  return id;
}

void finishRun(Database& db, int64_t run_id, const std::string& status) {
  db.transaction([&] {
    Statement update(db,
                     "UPDATE runs SET status = ?, ended_at = ?, recorder_pid = NULL WHERE id = ?");
    update.bind(1, status).bind(2, nowSeconds()).bind(3, run_id).run();
    Statement attempt(db, "UPDATE attempts SET ended_at = ? WHERE run_id = ? AND ended_at IS NULL");
    attempt.bind(1, nowSeconds()).bind(2, run_id).run();
  });
}

void recordRunHosts(Database& db, int64_t run_id, const std::vector<RunHost>& hosts) {
  db.transaction([&] {
    Statement insert(db,
                     "INSERT INTO run_hosts (run_id, node_rank, alias, hostname, port, user, "
                     "fingerprint, node_binary, uploaded, command, libssh_version) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const RunHost& host : hosts) {
      insert.bind(1, run_id)
          .bind(2, host.node_rank)
          .bind(3, host.alias)
          .bind(4, host.hostname)
          .bind(5, host.port)
          .bind(6, host.user)
          .bind(7, host.fingerprint)
          .bind(8, host.node_binary)
          .bind(9, host.uploaded ? 1 : 0)
          .bind(10, host.command)
          .bind(11, host.libssh_version);
      insert.run();
    }
  });
}

void recordRunError(Database& db, int64_t run_id, const std::string& message,
                    std::optional<int> rank, std::optional<std::string> host) {
  Statement update(db,
                   "UPDATE runs SET error = ?, error_rank = ?, error_host = ? WHERE id = ? AND "
                   "error IS NULL");
  update.bind(1, message).bind(2, rank).bind(3, host).bind(4, run_id).run();
}

void recordRunRootCause(Database& db, int64_t run_id, const std::string& message) {
  Statement update(db,
                   "UPDATE runs SET error = ?, error_rank = NULL, error_host = NULL WHERE id = ?");
  update.bind(1, message).bind(2, run_id).run();
}

int reconcileInterruptedRuns(Database& db) {
  const std::string host = thisHostName();
  std::vector<int64_t> orphaned;
  {
    Statement running(db,
                      "SELECT id, recorder_pid FROM runs WHERE status IN ('pending', 'running') "
                      "AND recorder_host = ? AND detached = 0");
    running.bind(1, host);
    while (running.run()) {
      const auto pid = static_cast<pid_t>(running.columnInt(1));
      if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))
        orphaned.push_back(running.columnInt(0));
    }
  }
  for (int64_t id : orphaned) finishRun(db, id, "interrupted");
  return static_cast<int>(orphaned.size());
}

void markRunDetached(Database& db, int64_t run_id, const std::vector<std::string>& job_dirs) {
  db.transaction([&] {
    Statement update(db, "UPDATE runs SET detached = 1, recorder_pid = NULL WHERE id = ?");
    update.bind(1, run_id).run();
    Statement insert(db,
                     "INSERT OR REPLACE INTO run_job_dirs (run_id, node_rank, job_dir) "
                     "VALUES (?, ?, ?)");
    for (size_t node = 0; node < job_dirs.size(); ++node) {
      insert.bind(1, run_id).bind(2, static_cast<int64_t>(node)).bind(3, job_dirs[node]);
      insert.run();
    }
  });
}

void recordSchedulerJob(Database& db, int64_t run_id, const std::string& kind,
                        const std::string& job_id) {
  Statement update(db,
                   "UPDATE runs SET scheduler = ?, scheduler_job_id = ?, scheduler_state = '', "
                   "scheduler_reason = '', scheduler_nodes = '' WHERE id = ?");
  update.bind(1, kind).bind(2, job_id).bind(3, run_id).run();
}

void recordSchedulerState(Database& db, int64_t run_id, const SchedulerJob& job) {
  // The words are Slurm's queued and started states, as runStatusOfSlurmState maps them
  // (remote/slurm/slurm_state.h); every other word, a final one too, leaves the status alone.
  Statement update(
      db,
      "UPDATE runs SET scheduler = coalesce(nullif(?1, ''), scheduler), scheduler_job_id = "
      "coalesce(nullif(?2, ''), scheduler_job_id), scheduler_state = ?3, scheduler_reason = ?4, "
      "scheduler_nodes = ?5, status = CASE WHEN status = 'running' AND ?3 IN ('PENDING', "
      "'CONFIGURING', 'REQUEUED', 'RESIZING', 'SUSPENDED') THEN 'pending' WHEN status = "
      "'pending' AND ?3 IN ('RUNNING', 'COMPLETING', 'STOPPED', 'SIGNALING', 'STAGE_OUT') THEN "
      "'running' ELSE status END WHERE id = ?6");
  update.bind(1, job.kind).bind(2, job.job_id).bind(3, job.state).bind(4, job.reason);
  update.bind(5, job.nodes).bind(6, run_id).run();
}

std::optional<DetachedRun> findDetachedRun(Database& db, int64_t run_id) {
  DetachedRun run;
  {
    Statement select(db,
                     "SELECT spec, status, world_size, detached, scheduler, scheduler_job_id, "
                     "scheduler_state, scheduler_reason, scheduler_nodes FROM runs WHERE id = ?");
    select.bind(1, run_id);
    if (!select.run()) return std::nullopt;
    run.spec_json = select.columnText(0);
    run.status = select.columnText(1);
    run.world_size = static_cast<int>(select.columnInt(2));
    if (!select.isNull(4))
      run.scheduler = SchedulerJob{.kind = select.columnText(4),
                                   .job_id = select.columnText(5),
                                   .state = select.columnText(6),
                                   .reason = select.columnText(7),
                                   .nodes = select.columnText(8)};
    if (select.columnInt(3) == 0) return run;
  }
  Statement dirs(db,
                 "SELECT job_dir, agent_pid, agent_start_time, agent_session, agent_boot_id "
                 "FROM run_job_dirs WHERE run_id = ? ORDER BY node_rank");
  dirs.bind(1, run_id);
  while (dirs.run()) {
    run.job_dirs.push_back(dirs.columnText(0));
    std::optional<RecordedAgent> agent;
    if (!dirs.isNull(1) && !dirs.isNull(2) && !dirs.isNull(3))
      agent = RecordedAgent{.pid = dirs.columnInt(1),
                            .start_time = dirs.columnInt(2),
                            .session = dirs.columnInt(3),
                            .boot_id = dirs.columnText(4)};
    run.agents.push_back(agent);
  }
  return run;
}

void recordDetachedAgent(Database& db, int64_t run_id, int node_rank, const RecordedAgent& agent) {
  Statement update(
      db,
      "UPDATE run_job_dirs SET agent_pid = ?, agent_start_time = ?, agent_session = ?, "
      "agent_boot_id = ? WHERE run_id = ? AND node_rank = ?");
  update.bind(1, agent.pid)
      .bind(2, agent.start_time)
      .bind(3, agent.session)
      .bind(4, agent.boot_id)
      .bind(5, run_id)
      .bind(6, static_cast<int64_t>(node_rank))
      .run();
}

void claimRun(Database& db, int64_t run_id) {
  Statement update(db, "UPDATE runs SET recorder_pid = ?, recorder_host = ? WHERE id = ?");
  update.bind(1, static_cast<int64_t>(getpid())).bind(2, thisHostName()).bind(3, run_id).run();
}

int ranksThatSaidHello(Database& db, int64_t run_id) {
  // A rank's row without a host holds only a done's status (event_store.cpp).
  Statement select(db,
                   "SELECT count(DISTINCT rank) FROM ranks WHERE run_id = ? AND host IS NOT NULL");
  select.bind(1, run_id);
  return select.run() ? static_cast<int>(select.columnInt(0)) : 0;
}

std::map<int, std::pair<int, uint64_t>> lastStoredSeqs(Database& db, int64_t run_id) {
  std::map<int, std::pair<int, uint64_t>> last;
  Statement select(db,
                   "SELECT rank, attempt, max(last_seq) FROM seq_ranges WHERE run_id = ? "
                   "GROUP BY rank, attempt ORDER BY rank, attempt");
  select.bind(1, run_id);
  while (select.run()) {
    // Ordered by attempt: the highest one is the last assigned.
    last[static_cast<int>(select.columnInt(0))] = {static_cast<int>(select.columnInt(1)),
                                                   static_cast<uint64_t>(select.columnInt(2))};
  }
  return last;
}

}  // namespace ringmaster::storage
