// The SQL pieces that count the time a rank's communication covers (query/comm_stats.cpp and
// query/comm_by_dimension.cpp). One rank's operations overlap in time (a pipeline stage's posted
// receives, DDP's bucket all-reduces, FSDP's prefetch), so the time they cover is the length of
// the union of their intervals, not the sum. SQL sweeps each partition's intervals in order of
// start: `reach` is the latest end among the earlier ones (a window `max(end) OVER earlier`, null
// for the first), and each interval adds only what lies past it. One clear of every earlier
// interval adds its length as stored, so disjoint operations sum exactly.
#pragma once

#include <string>

namespace ringmaster::storage {

// What the interval [start, start + length] adds to the union of the earlier ones (SQL).
std::string newlyCoveredMs(const std::string& start, const std::string& length,
                           const std::string& reach);
// The window of the rows before this one in a partition's order of start (SQL).
std::string earlierWindow(const std::string& partition, const std::string& start);
// An event's interval, in milliseconds of its rank's clock: it ended at `t` (seconds) after
// `duration_ms` (docs/telemetry.md), and its wait for peers, where measured, was at its start.
inline constexpr char kStartMs[] = "t * 1000.0 - duration_ms";
inline constexpr char kWaitedMs[] = "min(max(coalesce(wait_ms, 0), 0), duration_ms)";

}  // namespace ringmaster::storage
