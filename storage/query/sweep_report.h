// A sweep's report (issue 37), which every front end formats (`ringmaster show --sweep`, the web's
// sweep page, the desktop's sweep view): its members with their axis values, states and run
// figures; an axis per swept field and per run figure (query/compare_axes.h) for the table, the
// parallel-coordinates chart and the scatter; and the best run by a chosen figure with what its
// spec sets differently from the others'.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ringmaster::storage {

class Database;

// Which way a figure is better: rates (samples/s, tokens/s) and MFU higher, everything else
// (losses, times, memory, shares) lower.
bool higherIsBetter(std::string_view figure_id);

// `rank_by`: a run figure's id (figures.h); empty: "final_loss". kInvalidArgument for a figure that
// is not a run figure, naming the run figures. The JSON (docs/sweeps.md):
// {"sweep": {"id", "name", "spec_path", "status", "parallel", "created_at", "ended_at",
//            "detached", "plan", "fields": [swept field paths, in the plan's order],
//            "members": N, "ended": N},
//  "members": [{"position", "values": {field: value}, "state", "run": id | null,
//               "status": run status | "", "error": text | null,
//               "figures": {figure id: number | null}}],
//  "axes": [toJson(ComparisonAxis)]: each swept field, then every run figure, over the members
//          that have a run (in members' order; "runs" lists those run ids),
//  "runs": [run ids of the axes' points],
//  "best" (among the completed runs where any completed, else among every run):
//          {"figure", "higher_is_better", "run", "position", "value",
//           "differences": [{"field", "value", "others": [the other runs' values that
//                            differ from it, each once]}]}
//          | null where no run has the figure}.
nlohmann::json sweepReport(const Database& db, int64_t sweep_id, double now,
                           std::string_view rank_by = {});

}  // namespace ringmaster::storage
