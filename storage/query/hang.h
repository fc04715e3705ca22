// The live hang view: each rank's latest progress report per communicator group (the telemetry
// `progress` event, table rank_progress) and the diagnosis made from them while a run is running:
// which rank has not reached which collective, how long the others have waited, which ranks have
// gone silent. It does not judge ended runs: their root cause says what went wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"

namespace ringmaster::storage {

// A diagnosis needs a rank to have waited this many of its reporting periods in one operation...
inline constexpr double kHangAfterPeriods = 2;
// ... and calls a rank silent when its last report is this many periods old.
inline constexpr double kSilentAfterPeriods = 3;
// A rank counts as waiting only while its latest report is at most this many periods old: a wait is
// brought forward to now over the gap to the rank's next report, not beyond it.
inline constexpr double kFreshForPeriods = 2;
// A rank short of the stuck collective is held up in an earlier one, not its cause, only while it
// still reports (its latest report at most this many periods old) from a wait in that earlier one.
inline constexpr double kHeldUpWithinPeriods = 1.5;

// One rank's latest report for one group, its times brought forward to `now`.
struct RankProgress {
  int rank = 0;
  std::string group;
  double t = 0;         // when it reported (the rank's clock)
  double period_s = 0;  // its reporting period
  double age_s = 0;     // now - t, at least 0
  std::optional<int64_t> step;
  int64_t started = 0;    // last collective started
  int64_t completed = 0;  // last collective completed
  std::optional<std::string> completed_op;
  std::optional<std::string> op;  // the operation it waits in, if any
  std::optional<int64_t> op_seq;
  std::optional<int64_t> peer;
  std::optional<double> waiting_s;  // in `op` for this long by now (the report's wait + age)
  std::vector<int> not_arrived;     // peers it saw short of op_seq
  std::vector<int> silent;          // peers whose heartbeat it saw stop
  bool stale = false;               // no report for kSilentAfterPeriods periods
};

// One stuck operation of one group.
struct HangDiagnosis {
  std::string group;
  std::string op;  // "all_reduce", "recv", ...
  int64_t op_seq = 0;
  std::optional<int> peer;   // a send or receive's peer, or a rooted collective's root
  std::vector<int> stuck;    // ranks that have not reached it (or went silent inside it)
  std::vector<int> silent;   // ranks whose reports (or heartbeats) stopped
  std::vector<int> waiting;  // ranks waiting in it
  double waiting_s = 0;      // the longest of their waits
  // For a person: "rank 2 has not reached all_reduce #28 (ranks 0, 1, 3 waiting 45 s)".
  std::string message;
};

struct LiveProgress {
  bool running = false;             // the run is running: only then is there a diagnosis
  std::vector<RankProgress> ranks;  // the latest attempt's, by group then rank
  std::vector<HangDiagnosis> hangs;
  // What each rank is doing, for a table: "waiting 45 s in all_reduce #28", "silent for 12 s",
  // "has not reached all_reduce #28"; empty where nothing is worth saying. Indexed by rank.
  std::vector<std::string> rank_states;
};

// The run's progress at `now` (seconds since the epoch; the caller's clock, compared with the
// ranks' report times). Throws kInvalidArgument for a run that does not exist.
LiveProgress loadLiveProgress(const Database& db, int64_t run_id, double now);

// The diagnosis from reports alone (what loadLiveProgress does once it has read them), for a run
// of `world_size` ranks.
LiveProgress diagnoseProgress(std::vector<RankProgress> ranks, int world_size);

}  // namespace ringmaster::storage
