// Matching the members of a collective across ranks, and each member's wait for the last to start.
#include "recorder/collective_matching.h"

#include <algorithm>
#include <utility>

#include "db/database.h"
#include "db/statement.h"

namespace ringmaster::storage {

void CollectiveMatcher::add(const CommRow& row) {
  const CommEvent& c = row.event;
  addMember({row.attempt, c.group, static_cast<int64_t>(c.seq_op)}, *c.group_size,
            {std::nullopt, *c.start_us, c.duration_ms, row});
}

void CollectiveMatcher::loadPending(Database& db, int64_t run_id, int attempt) {
  Statement rows(db,
                 "SELECT rowid, group_name, seq_op, group_size, start_us, duration_ms, attempt "
                 "FROM comm_events WHERE run_id = ? AND attempt >= ? AND start_us IS NOT NULL "
                 "AND seq_op IS NOT NULL AND wait_ms IS NULL AND group_size > 1 ORDER BY rowid");
  rows.bind(1, run_id).bind(2, int64_t{attempt});
  while (rows.run()) {
    PendingCollective& pending =
        pending_[{static_cast<int>(rows.columnInt(6)), rows.columnText(1), rows.columnInt(2)}];
    pending.group_size = rows.columnInt(3);
    pending.members.push_back(
        {rows.columnInt(0), rows.columnInt(4), rows.columnDouble(5), std::nullopt});
  }
}

void CollectiveMatcher::insertHeldRows() {
  for (const Key& key : held_) {
    if (auto it = pending_.find(key); it != pending_.end()) insertHeldRows(it->second);
  }
  held_.clear();
}

void CollectiveMatcher::addMember(const Key& key, int64_t group_size, Member member) {
  auto [it, inserted] = pending_.try_emplace(key);
  PendingCollective& pending = it->second;
  if (inserted) pending.group_size = group_size;
  const bool held = member.row.has_value();
  pending.members.push_back(std::move(member));
  if (static_cast<int64_t>(pending.members.size()) >= pending.group_size) {
    writeWaits(pending);
    pending_.erase(it);
    return;
  }
  if (held) held_.push_back(key);
  if (pending_.size() > kMaxPendingCollectives) {
    insertHeldRows(pending_.begin()->second);
    pending_.erase(pending_.begin());
  }
}

// Each member waited from its start to the latest start (the last to arrive), at most its
// duration.
void CollectiveMatcher::writeWaits(const PendingCollective& complete) {
  int64_t arrival = complete.members.front().start_us;
  for (const Member& m : complete.members) arrival = std::max(arrival, m.start_us);
  for (const Member& m : complete.members) {
    const double late_ms = static_cast<double>(arrival - m.start_us) / 1000.0;
    const double wait_ms = std::clamp(late_ms, 0.0, std::max(m.duration_ms, 0.0));
    if (m.row)
      writer_.insertComm(*m.row, wait_ms);
    else
      writer_.setCommWait(*m.rowid, wait_ms);
  }
}

// Inserts the held rows of a collective still missing members, their wait null for now.
void CollectiveMatcher::insertHeldRows(PendingCollective& pending) {
  for (Member& m : pending.members) {
    if (!m.row) continue;
    m.rowid = writer_.insertComm(*m.row, std::nullopt);
    m.row.reset();
  }
}

}  // namespace ringmaster::storage
