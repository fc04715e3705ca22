// The comparison of layout_trials.h: each member's run report read into the cost model's terms.
#include "plan/layout_trials.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"
#include "query/run_report.h"

namespace ringmaster::plan {
namespace {

std::vector<double> averageRanks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = (static_cast<double>(i + j) / 2) + 1;
    i = j + 1;
  }
  return ranks;
}

std::vector<TermPair> predictedTerms(const StepPrediction& p) {
  std::vector<TermPair> terms = {
      {"step", 1e3 * p.step_s}, {"compute", 1e3 * p.compute_s}, {"bubble", 1e3 * p.bubble_s}};
  for (const DimensionCost& cost : p.comm)
    terms.push_back({fmt::format("comm {}", toString(cost.dim)), 1e3 * cost.seconds});
  return terms;
}

// The run's measured terms, by the names predictedTerms gives. A step event's compute excludes its
// exposed communication and a pipeline stage's wait for another (the bubble); tensor parallelism's
// collectives wait at once inside the forward and backward, so all of the tp dimension's time per
// step is exposed, and the other dimensions share the rest of the exposed time.
void measureTerms(const storage::RunReport& report, std::vector<TermPair>& terms) {
  const double step = report.summary.mean_step_ms;
  const double bubble = report.summary.bubble_fraction.value_or(0) * step;
  double compute = 0, exposed = 0;
  for (const storage::RankReport& rank : report.ranks) {
    compute += rank.comm.mean_compute_ms;
    exposed += rank.comm.mean_exposed_comm_ms;
  }
  const double ranks = std::max<double>(1, static_cast<double>(report.ranks.size()));
  double tp = 0, overlappable = 0;  // ms per step: tp's, and the others' (exposed in part)
  for (const storage::DimensionComm& dim : report.comm_dims.dims)
    (dim.dim == "tp" ? tp : overlappable) += dim.ms_per_step;
  for (TermPair& term : terms) {
    if (term.term == "step") term.measured_ms = step;
    if (term.term == "bubble") term.measured_ms = bubble;
    if (term.term == "compute") term.measured_ms = compute / ranks;
    if (term.term == "comm tp") term.measured_ms = tp;
    for (const storage::DimensionComm& dim : report.comm_dims.dims) {
      if (dim.dim == "tp" || term.term != "comm " + dim.dim || overlappable <= 0) continue;
      term.measured_ms = std::max(0.0, exposed / ranks - tp) * dim.ms_per_step / overlappable;
    }
  }
}

void findFurthestTerm(TrialsReport& report) {
  std::map<std::string, std::pair<double, int>> log_sums;
  for (const TrialComparison& trial : report.trials) {
    for (const TermPair& term : trial.terms) {
      if (term.term == "step" || !term.ratio() || *term.ratio() <= 0) continue;
      auto& [sum, count] = log_sums[term.term];
      sum += std::log(*term.ratio());
      ++count;
    }
  }
  double worst = -1;
  for (const auto& [term, sum_count] : log_sums) {
    const double mean = sum_count.first / sum_count.second;
    if (std::abs(mean) <= worst) continue;
    worst = std::abs(mean);
    report.furthest_term = term;
    report.furthest_ratio = std::exp(mean);
  }
}

}  // namespace

std::optional<double> TermPair::ratio() const {
  if (!measured_ms || predicted_ms <= 0) return std::nullopt;
  return *measured_ms / predicted_ms;
}

std::optional<double> rankCorrelation(const std::vector<double>& a, const std::vector<double>& b) {
  RM_CHECK_ARG(a.size() == b.size(), "rank correlation of series of different lengths");
  if (a.size() < 2) return std::nullopt;
  const std::vector<double> ra = averageRanks(a), rb = averageRanks(b);
  const double mean = (static_cast<double>(a.size()) + 1) / 2;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va <= 0 || vb <= 0) return std::nullopt;
  return cov / std::sqrt(va * vb);
}

TrialsReport compareTrials(const storage::Database& db, const nlohmann::json& sweep_report,
                           const std::vector<RankedLayout>& predicted, double now) {
  TrialsReport out;
  std::vector<double> predicted_rates, measured_rates;
  for (const nlohmann::json& member : sweep_report.at("members")) {
    const int position = member.at("position").get<int>();
    if (position < 0 || position >= static_cast<int>(predicted.size()) ||
        !predicted[static_cast<size_t>(position)].prediction)
      continue;
    const RankedLayout& layout = predicted[static_cast<size_t>(position)];
    const StepPrediction& p = *layout.prediction;
    TrialComparison trial{.position = position,
                          .label = layout.planned.layout.label(),
                          .status = member.value("state", ""),
                          .terms = predictedTerms(p),
                          .predicted_rate = p.rate(),
                          .rate_unit = p.has_tokens ? "tokens/s" : "samples/s"};
    if (member.contains("run") && member["run"].is_number_integer()) {
      trial.run = member["run"].get<int64_t>();
      const storage::RunReport report = storage::buildRunReport(db, *trial.run, now);
      trial.status = report.summary.run.status;
      if (report.summary.mean_step_ms > 0) {
        measureTerms(report, trial.terms);
        trial.measured_rate = p.has_tokens ? report.summary.tokens_per_second.value_or(0)
                                           : report.summary.samples_per_second;
        predicted_rates.push_back(trial.predicted_rate);
        measured_rates.push_back(*trial.measured_rate);
      }
    }
    out.trials.push_back(std::move(trial));
  }
  out.rank_correlation = rankCorrelation(predicted_rates, measured_rates);
  findFurthestTerm(out);
  return out;
}

std::string trialsText(const TrialsReport& report) {
  std::string text;
  for (const TrialComparison& trial : report.trials) {
    text += fmt::format("#{} {} ({}{})\n", trial.position + 1, trial.label, trial.status,
                        trial.run ? fmt::format(", run {}", *trial.run) : "");
    text += fmt::format("  {:<10} predicted {:>10.0f}  measured {:>10}\n", trial.rate_unit,
                        trial.predicted_rate,
                        trial.measured_rate ? fmt::format("{:.0f}", *trial.measured_rate) : "-");
    for (const TermPair& term : trial.terms) {
      text += fmt::format("  {:<10} predicted {:>8.2f} ms  measured {:>8} ms  x{}\n", term.term,
                          term.predicted_ms,
                          term.measured_ms ? fmt::format("{:.2f}", *term.measured_ms) : "-",
                          term.ratio() ? fmt::format("{:.2f}", *term.ratio()) : "-");
    }
  }
  text += fmt::format("rank correlation (Spearman) of predicted and measured rates: {}\n",
                      report.rank_correlation ? fmt::format("{:.2f}", *report.rank_correlation)
                                              : "- (fewer than 2 trials measured)");
  if (report.furthest_term) {
    text += fmt::format("furthest off: {} (measured / predicted x{:.2f} on average)\n",
                        *report.furthest_term, *report.furthest_ratio);
  }
  return text;
}

nlohmann::json toJson(const TrialsReport& report) {
  auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nullptr; };
  nlohmann::json trials = nlohmann::json::array();
  for (const TrialComparison& trial : report.trials) {
    nlohmann::json terms = nlohmann::json::array();
    for (const TermPair& term : trial.terms) {
      terms.push_back({{"term", term.term},
                       {"predicted_ms", term.predicted_ms},
                       {"measured_ms", optional(term.measured_ms)},
                       {"ratio", optional(term.ratio())}});
    }
    trials.push_back({{"position", trial.position},
                      {"label", trial.label},
                      {"status", trial.status},
                      {"run", trial.run ? nlohmann::json(*trial.run) : nullptr},
                      {"terms", terms},
                      {"predicted_rate", trial.predicted_rate},
                      {"measured_rate", optional(trial.measured_rate)},
                      {"rate_unit", trial.rate_unit}});
  }
  return {{"trials", trials},
          {"rank_correlation", optional(report.rank_correlation)},
          {"furthest_term", report.furthest_term ? nlohmann::json(*report.furthest_term) : nullptr},
          {"furthest_ratio", optional(report.furthest_ratio)}};
}

}  // namespace ringmaster::plan
