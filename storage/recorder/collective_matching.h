// Waiting versus transfer of a collective (docs/telemetry.md): the comm events of one (group,
// seq_op) of one attempt (a restart numbers its operations from 1 again) are gathered until every
// member's is stored; then each row's wait_ms is the time from its start to the latest start, at
// most its duration. A collective that some member never reported keeps its rows' wait_ms null.
// The matcher decides; the rows are written through CommRowWriter (the recorder's EventStore).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "telemetry/events.h"

namespace ringmaster::storage {

class Database;

// A comm event as a row of `comm_events`: the event, and the attempt, rank and time it came with.
struct CommRow {
  int attempt;
  int rank;
  double t;
  CommEvent event;
};

// Where the matcher's rows go.
class CommRowWriter {
 public:
  virtual ~CommRowWriter() = default;
  // Inserts a row with its wait (null: not known, or not yet); returns its rowid.
  virtual int64_t insertComm(const CommRow& row, std::optional<double> wait_ms) = 0;
  // Sets the wait of a row inserted before.
  virtual void setCommWait(int64_t rowid, double wait_ms) = 0;
};

// A member's row is held back until its collective is complete or the batch ends: most
// collectives complete within a batch, and their rows are then inserted once, wait included
// (storage_bench --telemetry on a recorded 4-rank DDP stream, two thirds of it comm events: an
// UPDATE per row made ingest about a third slower than without the split, held rows about a
// sixth).
class CollectiveMatcher {
 public:
  explicit CollectiveMatcher(CommRowWriter& writer) : writer_(writer) {}

  // Whether a comm event waits for the other members of its collective: one of more than one
  // member, with its start time and without a wait measured by the rank itself.
  static bool needsMatching(const CommEvent& c) {
    return c.start_us && c.group_size && *c.group_size > 1 && !c.wait_ms;
  }
  // Adds a member's event (needsMatching); when it completes its collective, every member's row
  // is written with its wait.
  void add(const CommRow& row);
  // Takes up the collectives still missing members that a recorder before this one stored (attach,
  // a restarted launcher): those of `run_id` of every attempt from `attempt` on.
  void loadPending(Database& db, int64_t run_id, int attempt);
  // At the end of a batch: inserts every row still held back, its wait null for now (set when its
  // collective completes in a later batch).
  void insertHeldRows();

 private:
  struct Member {
    std::optional<int64_t> rowid;  // its row, once inserted
    int64_t start_us;
    double duration_ms;
    std::optional<CommRow> row;  // its row while held back
  };
  struct PendingCollective {
    int64_t group_size = 0;
    std::vector<Member> members;
  };
  using Key = std::tuple<int, std::string, int64_t>;  // (attempt, group, seq_op)
  // Collectives waiting for members, at most this many: a rank that died leaves its last ones
  // incomplete for good, and those are forgotten oldest first beyond the bound.
  static constexpr size_t kMaxPendingCollectives = 1 << 16;

  void addMember(const Key& key, int64_t group_size, Member member);
  void writeWaits(const PendingCollective& complete);
  void insertHeldRows(PendingCollective& pending);

  CommRowWriter& writer_;
  std::map<Key, PendingCollective> pending_;
  std::vector<Key> held_;  // collectives with held rows
};

}  // namespace ringmaster::storage
