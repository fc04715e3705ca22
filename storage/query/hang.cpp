// The live hang view's diagnosis over rank_progress: the waiting ranks' operation, the ranks short
// of it, the silent ones, and a sentence for each stuck operation.
#include "query/hang.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "db/statement.h"

namespace ringmaster::storage {

namespace {

// "2,3" as world ranks; anything that is not a rank is skipped (the list is a worker's text).
std::vector<int> parseRanks(const std::optional<std::string>& text) {
  std::vector<int> ranks;
  if (!text) return ranks;
  const char* p = text->c_str();
  while (*p != '\0') {
    char* end = nullptr;
    const long value = std::strtol(p, &end, 10);
    if (end == p) {
      ++p;
      continue;
    }
    if (value >= 0 && value <= 1 << 24) ranks.push_back(static_cast<int>(value));
    p = end;
  }
  return ranks;
}

std::string seconds(double s) {
  return fmt::format("{:.0f} s", std::max(0.0, s));
}

// "rank 2", "ranks 0, 1 and 3".
std::string rankList(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks.front());
  std::string text = "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

bool isPointToPoint(const std::string& op) {
  return op == "send" || op == "recv";
}

void addState(std::vector<std::string>& states, int rank, const std::string& state) {
  if (rank < 0 || static_cast<size_t>(rank) >= states.size()) return;
  std::string& text = states[static_cast<size_t>(rank)];
  if (text.find(state) != std::string::npos) return;
  if (!text.empty()) text += "; ";
  text += state;
}

}  // namespace

LiveProgress diagnoseProgress(std::vector<RankProgress> ranks, int world_size) {
  LiveProgress out;
  out.running = true;
  out.rank_states.assign(static_cast<size_t>(std::max(world_size, 0)), "");
  std::sort(ranks.begin(), ranks.end(), [](const RankProgress& a, const RankProgress& b) {
    return std::tie(a.group, a.rank) < std::tie(b.group, b.rank);
  });
  std::map<std::string, std::vector<const RankProgress*>> groups;
  std::map<int, bool> heard;  // by rank: whether any of its reports is fresh
  for (RankProgress& r : ranks) {
    r.stale = r.age_s > kSilentAfterPeriods * r.period_s;
    groups[r.group].push_back(&r);
    heard[r.rank] = heard[r.rank] || !r.stale;
  }

  for (const auto& [group, reports] : groups) {
    std::map<int, const RankProgress*> by_rank;
    std::set<int> members;
    for (const RankProgress* r : reports) {
      by_rank[r->rank] = r;
      members.insert(r->rank);
      for (int peer : r->not_arrived) members.insert(peer);
      for (int peer : r->silent) members.insert(peer);
    }
    if (group == "world")
      for (int r = 0; r < world_size; ++r) members.insert(r);
    const auto reportOf = [&](int rank) -> const RankProgress* {
      auto it = by_rank.find(rank);
      return it == by_rank.end() ? nullptr : it->second;
    };
    // Silent: no report for a few periods, or none at all, or a waiting peer saw its heartbeat
    // stop.
    std::set<int> silent;
    for (int m : members) {
      const RankProgress* r = reportOf(m);
      if (r == nullptr || r->stale) silent.insert(m);
    }
    // The operations ranks have waited in long enough to call them stuck: collectives by
    // (op, seq), each point-to-point wait on its own.
    std::map<std::tuple<std::string, int64_t, int>, std::vector<const RankProgress*>> stuck_ops;
    for (const RankProgress* r : reports) {
      if (r->stale || !r->op || !r->op_seq || !r->waiting_s) continue;
      if (r->age_s > kFreshForPeriods * r->period_s) continue;
      if (*r->waiting_s < kHangAfterPeriods * r->period_s) continue;
      const bool p2p = isPointToPoint(*r->op);
      // A collective without a root completes on every member or on none: when another member
      // completed it, this report is older than the rank's progress (a rank stopped since, whose
      // last report caught it in a wait), not a wait.
      if (!p2p && !r->peer &&
          std::any_of(reports.begin(), reports.end(), [&](const RankProgress* other) {
            return other != r && other->completed >= *r->op_seq;
          }))
        continue;
      stuck_ops[{*r->op, *r->op_seq, p2p ? r->rank : -1}].push_back(r);
      for (int peer : r->silent) silent.insert(peer);
    }
    if (stuck_ops.empty()) {
      continue;
    }
    for (const auto& [key, waiters] : stuck_ops) {
      const auto& [op, seq, p2p_rank] = key;
      HangDiagnosis d;
      d.group = group;
      d.op = op;
      d.op_seq = seq;
      std::set<int> waiting_set, named_not_arrived;
      for (const RankProgress* w : waiters) {
        waiting_set.insert(w->rank);
        d.waiting_s = std::max(d.waiting_s, *w->waiting_s);
        for (int peer : w->not_arrived) named_not_arrived.insert(peer);
        if (w->peer) d.peer = static_cast<int>(*w->peer);
      }
      d.waiting.assign(waiting_set.begin(), waiting_set.end());
      const std::string what = fmt::format("{} #{}", op, seq);
      const std::string in_group = group == "world" ? "" : fmt::format(" of {}", group);
      std::vector<std::string> parts;
      if (p2p_rank >= 0) {
        // A send or receive waits for one peer: name it, and whether it went silent.
        const std::string direction = op == "recv" ? "from" : "to";
        std::string text = fmt::format("rank {} has waited {} in {}{}", p2p_rank,
                                       seconds(d.waiting_s), what, in_group);
        if (d.peer) {
          text += fmt::format(" {} rank {}", direction, *d.peer);
          d.stuck.push_back(*d.peer);
          if (silent.count(*d.peer) != 0 || !heard[*d.peer]) {
            const RankProgress* peer = reportOf(*d.peer);
            text += peer ? fmt::format(", which has sent no progress for {}", seconds(peer->age_s))
                         : ", which has sent no progress";
            d.silent.push_back(*d.peer);
          }
          addState(out.rank_states, *d.peer, fmt::format("{} waits for it", rankList({p2p_rank})));
        }
        addState(out.rank_states, p2p_rank,
                 fmt::format("waiting {} in {}", seconds(d.waiting_s), what));
        d.message = text;
        out.hangs.push_back(std::move(d));
        continue;
      }
      std::vector<int> not_reached, held_up, silent_inside;
      for (int m : members) {
        if (waiting_set.count(m) != 0) continue;
        const RankProgress* r = reportOf(m);
        const bool short_of_it = named_not_arrived.count(m) != 0 || (r && r->started < seq);
        if (short_of_it) {
          // A rank short of it because it still waits in an earlier collective of the group is
          // held up there, not the cause: a ring or tree collective can complete on some members
          // while the stopped rank still owes another member its last chunk.
          const bool waits_earlier = r && silent.count(m) == 0 &&
                                     r->age_s <= kHeldUpWithinPeriods * r->period_s && r->op &&
                                     r->op_seq && *r->op_seq < seq && r->waiting_s;
          (waits_earlier ? held_up : not_reached).push_back(m);
        } else if (silent.count(m) != 0) {
          silent_inside.push_back(m);
        }
        if (silent.count(m) != 0) d.silent.push_back(m);
      }
      // Ranks that are all held up leave none to blame: then each of them is named as short.
      if (not_reached.empty() && silent_inside.empty()) std::swap(not_reached, held_up);
      const std::string waiting_text =
          fmt::format("{} waiting {}", rankList(d.waiting), seconds(d.waiting_s));
      if (!not_reached.empty()) {
        std::string text = fmt::format("{} {} not reached {}{}", rankList(not_reached),
                                       not_reached.size() == 1 ? "has" : "have", what, in_group);
        std::vector<int> quiet;
        for (int m : not_reached)
          if (silent.count(m) != 0) quiet.push_back(m);
        if (quiet.size() == not_reached.size())
          text += quiet.size() == 1 ? " and is silent" : " and are silent";
        else if (!quiet.empty())
          text += fmt::format(" ({} silent)", rankList(quiet));
        parts.push_back(text);
        for (int m : not_reached) {
          const RankProgress* r = reportOf(m);
          addState(out.rank_states, m,
                   fmt::format("has not reached {}{}", what,
                               silent.count(m) != 0
                                   ? (r ? fmt::format(", silent for {}", seconds(r->age_s))
                                        : std::string(", silent"))
                                   : std::string()));
        }
      }
      for (int m : held_up) {
        const RankProgress* r = reportOf(m);
        const std::string earlier = fmt::format("{} #{}", *r->op, *r->op_seq);
        parts.push_back(fmt::format("{} held up waiting {} in {}", rankList({m}),
                                    seconds(*r->waiting_s), earlier));
        addState(out.rank_states, m,
                 fmt::format("held up: waiting {} in {}", seconds(*r->waiting_s), earlier));
      }
      if (!silent_inside.empty()) {
        parts.push_back(fmt::format("{} stopped responding inside {}{}", rankList(silent_inside),
                                    what, in_group));
        for (int m : silent_inside) {
          const RankProgress* r = reportOf(m);
          addState(out.rank_states, m,
                   r ? fmt::format("silent for {} inside {}", seconds(r->age_s), what)
                     : fmt::format("silent inside {}", what));
        }
      }
      d.stuck = not_reached;
      d.stuck.insert(d.stuck.end(), silent_inside.begin(), silent_inside.end());
      std::sort(d.stuck.begin(), d.stuck.end());
      if (parts.empty()) {
        d.message = fmt::format("{} in {}{}; every rank reached it (the transfer itself stalled)",
                                waiting_text, what, in_group);
      } else {
        d.message = fmt::format("{} ({})", fmt::join(parts, "; "), waiting_text);
      }
      for (int w : d.waiting)
        addState(out.rank_states, w, fmt::format("waiting {} in {}", seconds(d.waiting_s), what));
      out.hangs.push_back(std::move(d));
    }
  }
  // A silent rank no diagnosis named (no one waits for it yet) is still worth a word.
  for (const RankProgress& r : ranks)
    if (r.stale && !out.rank_states.empty())
      addState(out.rank_states, r.rank, fmt::format("silent for {}", seconds(r.age_s)));
  out.ranks = std::move(ranks);
  return out;
}

LiveProgress loadLiveProgress(const Database& db, int64_t run_id, double now) {
  Statement run(db,
                "SELECT status, world_size, (SELECT max(attempt) FROM attempts WHERE run_id = "
                "?1) FROM runs WHERE id = ?1");
  run.bind(1, run_id);
  if (!run.run()) RM_THROW(kInvalidArgument, fmt::format("no run {}", run_id));
  const bool running = run.columnText(0) == "running";
  const int world_size = static_cast<int>(run.columnInt(1));
  const int64_t attempt = run.optionalInt(2).value_or(0);
  run.reset();

  Statement select(db,
                   "SELECT rank, group_name, t, period_s, step, started, completed, "
                   "completed_op, op, op_seq, peer, waiting_ms, not_arrived, silent "
                   "FROM rank_progress WHERE run_id = ? AND attempt = ?");
  select.bind(1, run_id).bind(2, attempt);
  std::vector<RankProgress> ranks;
  while (select.run()) {
    RankProgress r;
    r.rank = static_cast<int>(select.columnInt(0));
    r.group = select.columnText(1);
    r.t = select.columnDouble(2);
    r.period_s = select.columnDouble(3);
    r.age_s = std::max(0.0, now - r.t);
    r.step = select.optionalInt(4);
    r.started = select.columnInt(5);
    r.completed = select.columnInt(6);
    r.completed_op = select.optionalText(7);
    r.op = select.optionalText(8);
    r.op_seq = select.optionalInt(9);
    r.peer = select.optionalInt(10);
    if (const auto waiting_ms = select.optionalDouble(11); waiting_ms && r.op)
      r.waiting_s = *waiting_ms / 1000 + r.age_s;
    r.not_arrived = parseRanks(select.optionalText(12));
    r.silent = parseRanks(select.optionalText(13));
    ranks.push_back(std::move(r));
  }
  if (running) return diagnoseProgress(std::move(ranks), world_size);
  LiveProgress ended;
  ended.ranks = std::move(ranks);
  ended.rank_states.assign(static_cast<size_t>(std::max(world_size, 0)), "");
  return ended;
}

}  // namespace ringmaster::storage
