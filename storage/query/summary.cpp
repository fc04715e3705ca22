// Summary figures from the series summaries and the schedule queries; spec differences from the
// flattened canonical spec JSON.
#include "query/summary.h"

#include <limits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "db/statement.h"
#include "query/schedule.h"
#include "query/series.h"
#include "telemetry/fields.h"

namespace ringmaster::storage {

namespace {

// Leaves of a JSON document by path; arrays of scalars are one leaf (their JSON text).
void flatten(const nlohmann::json& value, const std::string& path,
             std::map<std::string, std::string>& leaves) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items())
      flatten(child, path.empty() ? key : path + "." + key, leaves);
    return;
  }
  if (value.is_array()) {
    const bool scalars =
        std::all_of(value.begin(), value.end(), [](const auto& e) { return e.is_primitive(); });
    if (!scalars) {
      for (size_t i = 0; i < value.size(); ++i)
        flatten(value[i], fmt::format("{}[{}]", path, i), leaves);
      return;
    }
  }
  leaves[path] = value.is_string() ? value.get<std::string>() : value.dump();
}

// A byte count kept as a double (the steps table keeps memory as REAL), clamped into
// [0, 2^63 - 1]: a memory of 2^64 - 1 bytes reads as 2^63 - 1 (8 EiB), never as negative.
int64_t bytesOf(double value) {
  if (!(value > 0)) return 0;
  if (value >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(value);
}

// A count summed as a double (the steps table keeps counts as REAL), clamped into
// [0, 2^63 - 1] as bytesOf: a hand-edited database's negative or huge sums stay defined.
int64_t countOf(double value) {
  return bytesOf(value);
}

}  // namespace

std::optional<FinalLoss> finalLoss(const Database& db, int64_t run_id, int world_size) {
  Statement last(db, "SELECT max(step) FROM steps WHERE run_id = ? AND rank = ?");
  int64_t final_step = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    last.bind(1, run_id).bind(2, int64_t{rank});
    if (last.run() && !last.isNull(0)) final_step = std::max(final_step, last.columnInt(0));
    last.reset();
  }
  if (final_step == 0) return std::nullopt;
  Statement at(db,
               "SELECT loss, coalesce(samples, 1) FROM steps WHERE run_id = ? AND rank = ? AND "
               "step = ? AND loss IS NOT NULL");
  double weighted = 0, samples = 0, sum = 0;
  int losses = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    at.bind(1, run_id).bind(2, int64_t{rank}).bind(3, final_step);
    if (at.run()) {
      const double weight = std::max(at.columnDouble(1), 0.0);
      weighted += at.columnDouble(0) * weight;
      samples += weight;
      sum += at.columnDouble(0);
      ++losses;
    }
    at.reset();
  }
  if (losses == 0) return std::nullopt;
  // A script that logs its loss without samples= (0 samples) weighs nothing: unweighted, then.
  if (samples <= 0) return FinalLoss{.step = final_step, .loss = sum / losses};
  return FinalLoss{.step = final_step, .loss = weighted / samples};
}

RunSummary summarizeRun(const Database& db, int64_t run_id) {
  RunSummary summary{.run = loadRun(db, run_id)};
  const int world = summary.run.world_size;
  // Only the data-parallel replicas split the samples: the tp and pp ranks of a replica all report
  // its samples (issue 34: the run's stored mesh, not its strategy's name).
  const double sample_share =
      world > 0 ? static_cast<double>(summary.run.dataParallelSize()) / world : 1.0;
  double accuracy_sum = 0, step_ms_sum = 0, exposed_sum = 0, mfu_sum = 0;
  int accuracies = 0, mfus = 0;
  int64_t steps = 0;
  // One reader per series, each prepared once for all the ranks.
  SeriesReader loss_series(db, run_id, step_field::kLoss),
      accuracy_series(db, run_id, step_field::kAccuracy),
      step_ms_series(db, run_id, step_field::kStepMs),
      samples_series(db, run_id, step_field::kSamples),
      exposed_series(db, run_id, step_field::kExposedCommMs),
      peak_series(db, run_id, step_field::kMemPeak), tokens_series(db, run_id, step_field::kTokens),
      mfu_series(db, run_id, step_field::kMfu), lr_series(db, run_id, step_field::kLr),
      scale_series(db, run_id, step_field::kLossScale),
      skipped_series(db, run_id, step_field::kSkipped);
  for (int rank = 0; rank < world; ++rank) {
    const SeriesSummary loss = loss_series.summarize(rank);
    RankSummary& figures = summary.ranks.emplace_back(RankSummary{.rank = rank});
    if (!loss.empty()) {
      figures.last_step = loss.last_step;
      summary.final_step = std::max(summary.final_step, loss.last_step);
    }
    const SeriesSummary accuracy = accuracy_series.summarize(rank);
    if (!accuracy.empty()) {
      accuracy_sum += accuracy.last_value;
      ++accuracies;
    }
    const SeriesSummary step_ms = step_ms_series.summarize(rank);
    const SeriesSummary samples = samples_series.summarize(rank);
    if (step_ms.sum > 0) figures.samples_per_second = samples.sum * 1000 / step_ms.sum;
    summary.samples_per_second += sample_share * figures.samples_per_second;
    figures.mean_step_ms = step_ms.mean();
    step_ms_sum += step_ms.sum;
    if (__builtin_add_overflow(steps, step_ms.count, &steps))  // counts of a hand-edited database
      steps = std::numeric_limits<int64_t>::max();
    exposed_sum += exposed_series.summarize(rank).sum;
    const SeriesSummary peak = peak_series.summarize(rank);
    figures.peak_memory = peak.empty() ? 0 : bytesOf(peak.max);
    // Tokens over the step time of the steps that reported them (runs recorded before the step
    // event carried tokens have none).
    const SeriesSummary tokens = tokens_series.summarize(rank);
    if (!tokens.empty()) {
      const double tokens_ms = tokens.count == step_ms.count
                                   ? step_ms.sum
                                   : step_ms.mean() * static_cast<double>(tokens.count);
      if (tokens_ms > 0) {
        figures.tokens_per_second = tokens.sum * 1000 / tokens_ms;
        summary.tokens_per_second =
            summary.tokens_per_second.value_or(0) + sample_share * *figures.tokens_per_second;
      }
    }
    const SeriesSummary mfu = mfu_series.summarize(rank);
    if (!mfu.empty()) {
      figures.mfu = mfu.mean();
      mfu_sum += mfu.mean();
      ++mfus;
    }
    const SeriesSummary lr = lr_series.summarize(rank);
    if (!lr.empty()) figures.lr = lr.last_value;
    const SeriesSummary scale = scale_series.summarize(rank);
    if (!scale.empty()) figures.loss_scale = scale.last_value;
    const SeriesSummary skipped = skipped_series.summarize(rank);
    if (!skipped.empty()) {
      figures.skipped_steps = countOf(skipped.sum);
      summary.skipped_steps = std::max(summary.skipped_steps.value_or(0), *figures.skipped_steps);
    }
  }
  if (mfus > 0) summary.mfu = mfu_sum / mfus;
  if (!summary.ranks.empty()) {
    summary.lr = summary.ranks.front().lr;
    summary.loss_scale = summary.ranks.front().loss_scale;
  }
  if (auto loss = finalLoss(db, run_id, world)) summary.final_loss = loss->loss;
  if (accuracies > 0) summary.final_accuracy = accuracy_sum / accuracies;
  if (steps > 0) summary.mean_step_ms = step_ms_sum / static_cast<double>(steps);
  if (step_ms_sum > 0) summary.comm_share = exposed_sum / step_ms_sum;
  summary.bubble_fraction = meanBubbleFraction(db, run_id);
  return summary;
}

std::vector<SpecDifference> specDifferences(const std::vector<std::string>& spec_jsons) {
  std::vector<std::map<std::string, std::string>> leaves(spec_jsons.size());
  std::map<std::string, bool> paths;
  for (size_t i = 0; i < spec_jsons.size(); ++i) {
    nlohmann::json spec = nlohmann::json::parse(spec_jsons[i], nullptr, false);
    if (spec.is_discarded())
      RM_THROW(kFormat, fmt::format("the spec of run #{} is not valid JSON", i + 1));
    flatten(spec, "", leaves[i]);
    for (const auto& [path, value] : leaves[i]) paths[path] = true;
  }
  std::vector<SpecDifference> differences;
  for (const auto& [path, unused] : paths) {
    SpecDifference difference{.path = path};
    for (const auto& run : leaves) {
      auto it = run.find(path);
      difference.values.push_back(it == run.end() ? "" : it->second);
    }
    if (std::adjacent_find(difference.values.begin(), difference.values.end(),
                           std::not_equal_to<>()) != difference.values.end())
      differences.push_back(std::move(difference));
  }
  return differences;
}

RunComparison compareRuns(const Database& db, const std::vector<int64_t>& run_ids) {
  RunComparison comparison;
  std::vector<std::string> specs;
  for (int64_t id : run_ids) {
    comparison.runs.push_back(summarizeRun(db, id));
    specs.push_back(comparison.runs.back().run.spec_json);
  }
  comparison.differences = specDifferences(specs);
  return comparison;
}

}  // namespace ringmaster::storage
