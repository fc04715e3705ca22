// The layout advisor's predictions against a finished sweep of its top layouts (issue 37): per
// trial, predicted and measured step time split into compute, exposed communication per mesh
// dimension and bubble, the rates, and the rank correlation of the two orderings. It reads each
// member's run report (storage/query/run_report.h); `ringmaster plan --trials` prints it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/layout_cost.h"

namespace ringmaster::storage {
class Database;
}

namespace ringmaster::plan {

// One term of a step, ms: predicted, measured (nullopt where the run does not say).
struct TermPair {
  std::string term;  // "step", "compute", "bubble", "comm dp", "comm tp", "comm pp"
  double predicted_ms = 0;
  std::optional<double> measured_ms;
  // measured / predicted; nullopt without a measurement or where the prediction is 0.
  std::optional<double> ratio() const;
};

struct TrialComparison {
  int position = 0;  // the sweep member's, so the layout's place in the prediction (0: best)
  std::string label;
  std::string status;          // the run's ("completed", "failed"), or the member's state
  std::optional<int64_t> run;  // none where the member did not start
  std::vector<TermPair> terms;
  double predicted_rate = 0;
  std::optional<double> measured_rate;
  std::string rate_unit;  // "tokens/s" or "samples/s"
};

struct TrialsReport {
  std::vector<TrialComparison> trials;  // in member order
  // Spearman's rank correlation of predicted and measured rates over the trials measured (at
  // least 2), nullopt otherwise.
  std::optional<double> rank_correlation;
  // The term furthest off over the measured trials (the largest mean |log(measured/predicted)|),
  // and its mean ratio measured / predicted.
  std::optional<std::string> furthest_term;
  std::optional<double> furthest_ratio;
};

// `sweep_report`: storage::sweepReport of the sweep whose member i ran `predicted[i]`'s layout
// (topLayoutMembers' order). Measured: step = the run's mean step; bubble = its measured bubble
// fraction x step; tp = the tp dimension's time per step (its collectives wait at once, and the
// step event counts them as compute); the other dimensions = the ranks' mean exposed
// communication split over them by their time per step (comm_by_dimension.h: the step event does
// not split it); compute = the ranks' mean compute (step minus exposed comm) minus bubble and tp.
TrialsReport compareTrials(const storage::Database& db, const nlohmann::json& sweep_report,
                           const std::vector<RankedLayout>& predicted, double now);

// Spearman's rank correlation of two equally long series (average ranks for ties); nullopt for
// fewer than 2 points or a constant series.
std::optional<double> rankCorrelation(const std::vector<double>& a, const std::vector<double>& b);

// One block per trial: its label, rates, and a line per term (predicted, measured, ratio); then
// the correlation and the furthest term.
std::string trialsText(const TrialsReport& report);
nlohmann::json toJson(const TrialsReport& report);

}  // namespace ringmaster::plan
