// The one table of figures (issue 33): every number the run report gives about a run or a rank,
// named once. Each figure's id is its key in the run report's JSON (docs/run-report.md); its name
// is what every front end shows (the window header and rank table, `ringmaster show` and
// `compare`, the web pages, which read the table from GET /api/v1/figures). No values and no
// formatting here: how a kind is shown (MiB on the desktop, 47.0% in the CLI) is each front end's.
#pragma once

#include <string_view>
#include <vector>

namespace ringmaster::storage {

// How a figure's value reads: what a front end formats it as.
enum class FigureKind {
  kCount,         // an integer: steps, operations
  kNumber,        // a plain number: a loss, a learning rate
  kFraction,      // in [0, 1], shown as a percentage
  kMilliseconds,  // a duration in ms
  kSeconds,       // a duration in s
  kBytes,         // memory
  kRate,          // per second: samples/s, tokens/s
};

// Where in the report a figure is: the run's summary, each rank's row, or both.
enum class FigureScope { kRun, kRank, kRunAndRank };

struct Figure {
  std::string_view id;    // the run report's JSON key: "comm_share"
  std::string_view name;  // the one name, lower case unless a proper name: "exposed comm share"
  std::string_view unit;  // shown after a value or on an axis: "%", "ms", "samples/s", ""
  FigureKind kind = FigureKind::kNumber;
  FigureScope scope = FigureScope::kRun;
  std::string_view description;  // one sentence for a tooltip or a help text
};

// Every figure, in the order front ends list them.
const std::vector<Figure>& figureTable();

// The figure of this id, or nullptr.
const Figure* findFigure(std::string_view id);

// The figure of this id; an id not in the table is a bug (kInternal).
const Figure& figure(std::string_view id);

// Whether a figure is one of the run's (its summary), or of each rank's row.
bool isRunFigure(const Figure& figure);
bool isRankFigure(const Figure& figure);

// The names the API writes for a kind and a scope ("fraction", "run_and_rank").
std::string_view figureKindName(FigureKind kind);
std::string_view figureScopeName(FigureScope scope);

}  // namespace ringmaster::storage
