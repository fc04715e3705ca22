// The table of figures (figures.h): one row per number of the run report.
#include "query/figures.h"

#include <string>

#include "core/error.h"

namespace ringmaster::storage {

namespace {

using enum FigureKind;
using enum FigureScope;

}  // namespace

const std::vector<Figure>& figureTable() {
  static const std::vector<Figure> table = {
      // The run's summary.
      {"final_step", "final step", "", kCount, kRun, "the last step any rank reported"},
      {"planned_steps", "planned steps", "", kCount, kRun,
       "the steps the spec says the run makes (0: unknown)"},
      {"final_loss", "final loss", "", kNumber, kRun,
       "the loss of the global batch at the final step"},
      {"final_accuracy", "final accuracy", "%", kFraction, kRun,
       "the ranks' mean accuracy at their last step"},
      {"samples_per_second", "samples/s", "samples/s", kRate, kRunAndRank,
       "samples over step time (the run's: every rank's together)"},
      {"tokens_per_second", "tokens/s", "tokens/s", kRate, kRunAndRank,
       "tokens over step time, for models that report tokens"},
      {"mfu", "MFU", "%", kFraction, kRunAndRank,
       "model FLOPs utilisation: training FLOPs per second over the peak FLOP/s"},
      {"lr", "learning rate", "", kNumber, kRunAndRank, "the learning rate of the last step"},
      {"loss_scale", "loss scale", "", kNumber, kRunAndRank,
       "fp16: the loss scale of the last step"},
      {"skipped_steps", "skipped steps", "", kCount, kRunAndRank,
       "fp16: the steps whose update was skipped on an inf or NaN gradient"},
      {"mean_step_ms", "mean step", "ms", kMilliseconds, kRunAndRank,
       "the mean step time (the run's: over ranks and steps)"},
      {"comm_share", "exposed comm share", "%", kFraction, kRun,
       "exposed communication (not hidden behind compute) over step time, all ranks"},
      {"bubble_fraction", "bubble", "%", kFraction, kRun,
       "a pipeline's measured idle share of step time"},
      {"peak_memory", "peak memory", "bytes", kBytes, kRunAndRank,
       "the allocator's peak (the run's: the highest rank's)"},
      {"duration_s", "duration", "s", kSeconds, kRun, "from start to end (to now while running)"},
      // Each rank's row.
      {"last_step", "last step", "", kCount, kRank, "the rank's last reported step"},
      {"estimated_memory", "estimated memory", "bytes", kBytes, kRank,
       "the rank's memory estimated from the spec"},
      {"mean_compute_ms", "mean compute", "ms", kMilliseconds, kRank,
       "forward, backward and optimizer time per step"},
      {"mean_exposed_comm_ms", "mean exposed comm", "ms", kMilliseconds, kRank,
       "communication per step not hidden behind compute"},
      {"operations", "operations", "", kCount, kRank, "the communication operations it ran"},
      {"comm_ms", "comm time", "ms", kMilliseconds, kRank,
       "time in communication operations, overlapping ones once"},
      {"wait_ms", "wait time", "ms", kMilliseconds, kRank,
       "of the comm time, the part spent waiting for a peer"},
      {"transfer_ms", "transfer time", "ms", kMilliseconds, kRank,
       "of the comm time, the part spent transferring"},
      {"collectives_measured", "collectives measured", "", kCount, kRank,
       "collectives whose wait was measured"},
      {"mean_wait_ms", "wait per collective", "ms", kMilliseconds, kRank,
       "its mean wait per collective for the last rank to arrive"},
      {"peers_mean_wait_ms", "peers' wait per collective", "ms", kMilliseconds, kRank,
       "the other ranks' mean wait per collective for it"},
  };
  return table;
}

const Figure* findFigure(std::string_view id) {
  for (const Figure& figure : figureTable())
    if (figure.id == id) return &figure;
  return nullptr;
}

const Figure& figure(std::string_view id) {
  const Figure* found = findFigure(id);
  RM_ENFORCE(found != nullptr, "no figure '" + std::string(id) + "' in the table of figures");
  return *found;
}

bool isRunFigure(const Figure& figure) {
  return figure.scope != FigureScope::kRank;
}

bool isRankFigure(const Figure& figure) {
  return figure.scope != FigureScope::kRun;
}

std::string_view figureKindName(FigureKind kind) {
  switch (kind) {
    case kCount:
      return "count";
    case kNumber:
      return "number";
    case kFraction:
      return "fraction";
    case kMilliseconds:
      return "ms";
    case kSeconds:
      return "seconds";
    case kBytes:
      return "bytes";
    case kRate:
      return "rate";
  }
  return "number";
}

std::string_view figureScopeName(FigureScope scope) {
  switch (scope) {
    case kRun:
      return "run";
    case kRank:
      return "rank";
    case kRunAndRank:
      return "run_and_rank";
  }
  return "run";
}

}  // namespace ringmaster::storage
