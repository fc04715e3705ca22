// Running a sweep (issue 37): its members, each one ordinary run through RunSession (the spec the
// sweep starts from with the member's overrides applied as `--set`s), one after another or up to
// `parallel` at once on threads of their own, every step recorded through
// storage/recorder/sweep_records.h. A member whose spec is refused is recorded `refused` and a
// failed run does not stop the sweep; a stop request cancels the running runs (a second kills
// them) and records the members not started. The front end (app/cli/sweep_command) prints; this
// file never does.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run/slurm_sweep.h"
#include "sweep/sweep_plan.h"

namespace ringmaster::storage {
class Database;
struct SweepRecord;
struct SweepDriver;
}  // namespace ringmaster::storage

namespace ringmaster::session {

// A sweep checked and expanded, before anything is recorded.
struct PreparedSweep {
  std::string name;       // --name, else the spec file's stem
  std::string spec_path;  // the spec's file, as given
  nlohmann::json base;    // the spec each member starts from: sweep section removed, --sets applied
  SweepPlan plan;
  std::vector<MemberOverrides> members;
  int world_size = 1;  // of the first member whose spec is valid
  bool local = true;   // that member runs on this machine only
};

// Reads the spec at `spec_path` (its `sweep` section and `arguments`' axes), applies the user's
// `--set`s, expands the members and checks them: bad axes (sweep_plan.h), a field no member could
// set, and a sweep whose every member's spec is refused (naming the first member's problem) are
// refused here (kInvalidArgument, kSpec), before anything starts. A member refused on its own is
// left to run() to record.
PreparedSweep prepareSweep(const std::string& spec_path, const SweepArguments& arguments,
                           const std::vector<std::string>& overrides, std::string name = {});

// `--parallel auto`: as many runs as this machine's cores hold whole, max(1, cores / world
// size); 1 for a sweep whose runs go to other hosts or to Slurm.
int autoParallel(const PreparedSweep& sweep);

// Records the sweep `running`, every member `planned`; returns its id.
int64_t recordSweep(storage::Database& db, const PreparedSweep& sweep, int parallel, bool detached,
                    double now);

// The sweep's directory beside the database, as a run's (run_session.h runDirectory):
// DB_DIR/DB_FILE-runs/sweep-ID (a detached driver's log is there).
std::filesystem::path sweepDirectory(const std::string& db_path, int64_t sweep_id);

// Whether a sweep's recorded driver still runs (reconcileInterruptedSweeps's check): by its PID,
// start time and boot on this host; true for another host's, which cannot be judged from here.
bool sweepDriverRuns(const storage::SweepDriver& driver);

// What a front end hears while the sweep runs (every callback optional, all on the thread that
// called run()).
struct SweepObserver {
  // Each turn of the loop (about every 100 ms): where a front end turns its own stop requests
  // (signals) into requestStop().
  std::function<void()> on_tick;
  std::function<void(int position, int64_t run_id)> on_started;
  std::function<void(int position, const std::string& error)> on_refused;
  // The member's run ended: its status (completed, failed, cancelled) and, when the launch
  // itself failed, why.
  std::function<void(int position, int64_t run_id, const std::string& status,
                     const std::string& error)>
      on_ended;
  // The first stop request was taken: the running runs are asked to stop.
  std::function<void()> on_cancelling;
  // Where the runs go when that is worth saying: the Slurm allocation the members share, a member
  // that runs as its own Slurm job and why.
  std::function<void(const std::string& note)> on_note;
};

struct SweepOutcome {
  std::string status;  // completed, cancelled
  int completed = 0, failed = 0, cancelled = 0, refused = 0, not_started = 0;
};

class SweepRunner {
 public:
  // The recorded sweep `sweep_id` of `db_path`: its members still `planned` are run.
  SweepRunner(std::string db_path, int64_t sweep_id, double grace_s = 5);
  ~SweepRunner();
  SweepRunner(const SweepRunner&) = delete;
  SweepRunner& operator=(const SweepRunner&) = delete;

  int64_t sweepId() const { return sweep_id_; }

  // Records this process as the sweep's driver, runs the members and records the sweep's end.
  // Returns once every run it started has ended. Once per runner.
  SweepOutcome run(const SweepObserver& observer = {});

  // Safe from any thread and from a signal handler: the first cancels the running runs and starts
  // no other, the second kills them.
  void requestStop() { stop_requests_.fetch_add(1); }

  // Members over SSH: the ssh config and the host-key and credential answers every member's
  // RunRequest takes (as `ringmaster run`'s --ssh-config, --known-hosts). Before run().
  void setSsh(std::optional<std::string> ssh_config) { ssh_config_ = std::move(ssh_config); }
#if RINGMASTER_HAVE_LIBSSH
  void setSshConnect(SshConnectOptions connect) {
    connect_ = std::move(connect);
  }
#endif

 private:
  struct Member;
  struct Events;
  void startMember(Member& member);
  void runMember(Member& member);
  void handleEvents(storage::Database& db, const SweepObserver& observer, SweepOutcome& outcome);
  SlurmSweepAllocation shareSlurmAllocation(const SweepObserver& observer);

  std::string db_path_;
  int64_t sweep_id_ = 0;
  double grace_s_ = 5;
  int parallel_ = 1;
  std::string spec_path_, spec_text_;
  std::vector<std::unique_ptr<Member>> members_;
  std::unique_ptr<Events> events_;
  std::atomic<int> stop_requests_{0};
  bool ran_ = false;
  std::optional<std::string> ssh_config_;
#if RINGMASTER_HAVE_LIBSSH
  SshConnectOptions connect_;
#endif
};

}  // namespace ringmaster::session
