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

// One group's reports as the diagnosis reads them: its members (every rank a report names, and the
// whole world for "world"), each member's latest report, and the members gone silent.
struct GroupReports {
  const std::string& group;
  const std::vector<const RankProgress*>& reports;
  std::set<int> members;
  std::map<int, const RankProgress*> by_rank;
  std::set<int> silent;

  const RankProgress* reportOf(int rank) const {
    auto it = by_rank.find(rank);
    return it == by_rank.end() ? nullptr : it->second;
  }
  std::string inGroup() const { return group == "world" ? "" : fmt::format(" of {}", group); }
};

// Silent: no report for a few periods, or none at all (a waiting peer's list of ranks whose
// heartbeat stopped is added by stuckOperations).
GroupReports gatherGroup(const std::string& group, const std::vector<const RankProgress*>& reports,
                         int world_size) {
  GroupReports g{group, reports, {}, {}, {}};
  for (const RankProgress* r : reports) {
    g.by_rank[r->rank] = r;
    g.members.insert(r->rank);
    for (int peer : r->not_arrived) g.members.insert(peer);
    for (int peer : r->silent) g.members.insert(peer);
  }
  if (group == "world")
    for (int r = 0; r < world_size; ++r) g.members.insert(r);
  for (int m : g.members) {
    const RankProgress* r = g.reportOf(m);
    if (r == nullptr || r->stale) g.silent.insert(m);
  }
  return g;
}

// An operation ranks waited in: (op, seq, the waiting rank for a point-to-point wait or -1).
using StuckOp = std::tuple<std::string, int64_t, int>;

// The operations ranks have waited in long enough to call them stuck: collectives by (op, seq),
// each point-to-point wait on its own. Adds the peers the waiters saw go silent to g.silent.
std::map<StuckOp, std::vector<const RankProgress*>> stuckOperations(GroupReports& g) {
  std::map<StuckOp, std::vector<const RankProgress*>> stuck_ops;
  for (const RankProgress* r : g.reports) {
    if (r->stale || !r->op || !r->op_seq || !r->waiting_s) continue;
    if (r->age_s > kFreshForPeriods * r->period_s) continue;
    if (*r->waiting_s < kHangAfterPeriods * r->period_s) continue;
    const bool p2p = isPointToPoint(*r->op);
    // A collective without a root completes on every member or on none: when another member
    // completed it, this report is older than the rank's progress (a rank stopped since, whose
    // last report caught it in a wait), not a wait.
    if (!p2p && !r->peer &&
        std::any_of(g.reports.begin(), g.reports.end(), [&](const RankProgress* other) {
          return other != r && other->completed >= *r->op_seq;
        }))
      continue;
    stuck_ops[{*r->op, *r->op_seq, p2p ? r->rank : -1}].push_back(r);
    for (int peer : r->silent) g.silent.insert(peer);
  }
  return stuck_ops;
}

// The diagnosis's group, operation, waiting ranks, longest wait and peer, from its waiters; the
// ranks the waiters named as not arrived go to `named_not_arrived`.
HangDiagnosis startDiagnosis(const GroupReports& g, const StuckOp& key,
                             const std::vector<const RankProgress*>& waiters,
                             std::set<int>& named_not_arrived) {
  HangDiagnosis d;
  d.group = g.group;
  d.op = std::get<0>(key);
  d.op_seq = std::get<1>(key);
  std::set<int> waiting_set;
  for (const RankProgress* w : waiters) {
    waiting_set.insert(w->rank);
    d.waiting_s = std::max(d.waiting_s, *w->waiting_s);
    for (int peer : w->not_arrived) named_not_arrived.insert(peer);
    if (w->peer) d.peer = static_cast<int>(*w->peer);
  }
  d.waiting.assign(waiting_set.begin(), waiting_set.end());
  return d;
}

// A send or receive waits for one peer: name it, and whether it went silent.
void explainPointToPoint(const GroupReports& g, int waiting_rank, const std::map<int, bool>& heard,
                         HangDiagnosis& d, std::vector<std::string>& rank_states) {
  const std::string what = fmt::format("{} #{}", d.op, d.op_seq);
  const std::string direction = d.op == "recv" ? "from" : "to";
  std::string text = fmt::format("rank {} has waited {} in {}{}", waiting_rank,
                                 seconds(d.waiting_s), what, g.inGroup());
  if (d.peer) {
    text += fmt::format(" {} rank {}", direction, *d.peer);
    d.stuck.push_back(*d.peer);
    const auto peer_heard = heard.find(*d.peer);
    if (g.silent.count(*d.peer) != 0 || peer_heard == heard.end() || !peer_heard->second) {
      const RankProgress* peer = g.reportOf(*d.peer);
      text += peer ? fmt::format(", which has sent no progress for {}", seconds(peer->age_s))
                   : ", which has sent no progress";
      d.silent.push_back(*d.peer);
    }
    addState(rank_states, *d.peer, fmt::format("{} waits for it", rankList({waiting_rank})));
  }
  addState(rank_states, waiting_rank, fmt::format("waiting {} in {}", seconds(d.waiting_s), what));
  d.message = text;
}

// The members of a stuck collective that are not waiting in it, sorted by why: short of it (the
// cause), held up in an earlier collective of the group, or silent inside it.
struct CollectiveAbsentees {
  std::vector<int> not_reached, held_up, silent_inside;
};

CollectiveAbsentees sortAbsentees(const GroupReports& g, HangDiagnosis& d,
                                  const std::set<int>& named_not_arrived) {
  CollectiveAbsentees a;
  for (int m : g.members) {
    if (std::find(d.waiting.begin(), d.waiting.end(), m) != d.waiting.end()) continue;
    const RankProgress* r = g.reportOf(m);
    const bool short_of_it = named_not_arrived.count(m) != 0 || (r && r->started < d.op_seq);
    if (short_of_it) {
      // A rank short of it because it still waits in an earlier collective of the group is
      // held up there, not the cause: a ring or tree collective can complete on some members
      // while the stopped rank still owes another member its last chunk.
      const bool waits_earlier = r && g.silent.count(m) == 0 &&
                                 r->age_s <= kHeldUpWithinPeriods * r->period_s && r->op &&
                                 r->op_seq && *r->op_seq < d.op_seq && r->waiting_s;
      (waits_earlier ? a.held_up : a.not_reached).push_back(m);
    } else if (g.silent.count(m) != 0) {
      a.silent_inside.push_back(m);
    }
    if (g.silent.count(m) != 0) d.silent.push_back(m);
  }
  // Ranks that are all held up leave none to blame: then each of them is named as short.
  if (a.not_reached.empty() && a.silent_inside.empty()) std::swap(a.not_reached, a.held_up);
  return a;
}

// The sentence on the ranks that have not reached the collective, and their states.
std::string explainNotReached(const GroupReports& g, const std::vector<int>& not_reached,
                              const std::string& what, std::vector<std::string>& rank_states) {
  std::string text = fmt::format("{} {} not reached {}{}", rankList(not_reached),
                                 not_reached.size() == 1 ? "has" : "have", what, g.inGroup());
  std::vector<int> quiet;
  for (int m : not_reached)
    if (g.silent.count(m) != 0) quiet.push_back(m);
  if (quiet.size() == not_reached.size())
    text += quiet.size() == 1 ? " and is silent" : " and are silent";
  else if (!quiet.empty())
    text += fmt::format(" ({} silent)", rankList(quiet));
  for (int m : not_reached) {
    const RankProgress* r = g.reportOf(m);
    addState(
        rank_states, m,
        fmt::format("has not reached {}{}", what,
                    g.silent.count(m) != 0 ? (r ? fmt::format(", silent for {}", seconds(r->age_s))
                                                : std::string(", silent"))
                                           : std::string()));
  }
  return text;
}

// A collective waits for every member: name those short of it, held up before it or silent
// inside it; with none of them, the transfer itself stalled.
void explainCollective(const GroupReports& g, const std::set<int>& named_not_arrived,
                       HangDiagnosis& d, std::vector<std::string>& rank_states) {
  const std::string what = fmt::format("{} #{}", d.op, d.op_seq);
  const CollectiveAbsentees a = sortAbsentees(g, d, named_not_arrived);
  std::vector<std::string> parts;
  if (!a.not_reached.empty())
    parts.push_back(explainNotReached(g, a.not_reached, what, rank_states));
  for (int m : a.held_up) {
    const RankProgress* r = g.reportOf(m);
    const std::string earlier = fmt::format("{} #{}", *r->op, *r->op_seq);
    parts.push_back(
        fmt::format("{} held up waiting {} in {}", rankList({m}), seconds(*r->waiting_s), earlier));
    addState(rank_states, m,
             fmt::format("held up: waiting {} in {}", seconds(*r->waiting_s), earlier));
  }
  if (!a.silent_inside.empty()) {
    parts.push_back(fmt::format("{} stopped responding inside {}{}", rankList(a.silent_inside),
                                what, g.inGroup()));
    for (int m : a.silent_inside) {
      const RankProgress* r = g.reportOf(m);
      addState(rank_states, m,
               r ? fmt::format("silent for {} inside {}", seconds(r->age_s), what)
                 : fmt::format("silent inside {}", what));
    }
  }
  d.stuck = a.not_reached;
  d.stuck.insert(d.stuck.end(), a.silent_inside.begin(), a.silent_inside.end());
  std::sort(d.stuck.begin(), d.stuck.end());
  const std::string waiting_text =
      fmt::format("{} waiting {}", rankList(d.waiting), seconds(d.waiting_s));
  if (parts.empty()) {
    d.message = fmt::format("{} in {}{}; every rank reached it (the transfer itself stalled)",
                            waiting_text, what, g.inGroup());
  } else {
    d.message = fmt::format("{} ({})", fmt::join(parts, "; "), waiting_text);
  }
  for (int w : d.waiting)
    addState(rank_states, w, fmt::format("waiting {} in {}", seconds(d.waiting_s), what));
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
    GroupReports g = gatherGroup(group, reports, world_size);
    for (const auto& [key, waiters] : stuckOperations(g)) {
      std::set<int> named_not_arrived;
      HangDiagnosis d = startDiagnosis(g, key, waiters, named_not_arrived);
      if (const int p2p_rank = std::get<2>(key); p2p_rank >= 0)
        explainPointToPoint(g, p2p_rank, heard, d, out.rank_states);
      else
        explainCollective(g, named_not_arrived, d, out.rank_states);
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
