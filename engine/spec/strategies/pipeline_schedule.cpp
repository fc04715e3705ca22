// GPipe, 1F1B and Megatron's interleaved 1F1B as closed-form orders; ZB-H1 by list scheduling with
// unit costs; and the simulator that times any plan.
#include "spec/strategies/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

namespace {

using Phase = PipelinePhase;

PipelineAction forward(int mb, int chunk = 0) {
  return {Phase::kForward, mb, chunk};
}
PipelineAction backward(int mb, int chunk = 0) {
  return {Phase::kBackward, mb, chunk};
}

std::vector<PipelineAction> gpipe(int m) {
  std::vector<PipelineAction> out;
  for (int mb = 0; mb < m; ++mb) out.push_back(forward(mb));
  for (int mb = 0; mb < m; ++mb) out.push_back(backward(mb));
  return out;
}

// PipeDream-flush: p-r-1 warm-up forwards, then one forward and one backward in turn, then the
// remaining backwards; at most p - r micro-batches are stashed on rank r.
std::vector<PipelineAction> oneForwardOneBackward(int p, int m, int r) {
  const int warmup = std::min(p - r - 1, m);
  std::vector<PipelineAction> out;
  for (int mb = 0; mb < warmup; ++mb) out.push_back(forward(mb));
  for (int k = 0; k < m - warmup; ++k) {
    out.push_back(forward(warmup + k));
    out.push_back(backward(k));
  }
  for (int mb = m - warmup; mb < m; ++mb) out.push_back(backward(mb));
  return out;
}

// Megatron-LM's interleaved schedule: forward micro-step k runs chunk (k / p) % v of micro-batch
// (k / (p v)) p + k % p; backwards visit the chunks in reverse.
std::vector<PipelineAction> interleaved(int p, int m, int v, int r) {
  const int total = m * v;
  const int warmup = std::min((p - r - 1) * 2 + (v - 1) * p, total);
  auto micro = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto f = [&](int k) { return forward(micro(k), (k / p) % v); };
  auto b = [&](int k) { return backward(micro(k), v - 1 - (k / p) % v); };
  std::vector<PipelineAction> out;
  for (int k = 0; k < warmup; ++k) out.push_back(f(k));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(f(warmup + k));
    out.push_back(b(k));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(b(k));
  return out;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): 1F1B's order of F and B with the
// backward split into B (input gradient, on the critical path) and W (weight gradient, off it).
// Each rank, whenever it is free (unit costs), runs a ready B first, else the next F if fewer than
// p - r micro-batches await their B (1F1B's bound on stashed activations), else a pending W. With
// F = B = W this reaches the paper's bubble, (p-1) units, whenever m >= p.
std::vector<std::vector<PipelineAction>> zeroBubbleH1(int p, int m) {
  std::vector<std::vector<PipelineAction>> out(static_cast<size_t>(p));
  // Completion times with unit costs; -1: not done.
  std::vector<std::vector<int>> f_end(p, std::vector<int>(m, -1)), b_end = f_end;
  std::vector<int> next_f(p, 0), next_b(p, 0), next_w(p, 0), busy_until(p, 0);
  int remaining = 3 * p * m;
  for (int t = 0; remaining > 0; ++t) {
    RM_ENFORCE(t < 100 * (3 * m + p), "zb_h1 list scheduling did not finish");
    for (int r = 0; r < p; ++r) {
      if (busy_until[r] > t) continue;
      auto done = [&](int end) { return end >= 0 && end <= t; };
      const int b = next_b[r], f = next_f[r], w = next_w[r];
      const bool b_ready = b < m && done(f_end[r][b]) && (r == p - 1 || done(b_end[r + 1][b]));
      const bool f_ready = f < m && (r == 0 || done(f_end[r - 1][f])) && f - next_b[r] < p - r;
      const bool w_ready = w < b;
      if (b_ready) {
        out[r].push_back(backward(b));
        b_end[r][b] = t + 1;
        ++next_b[r];
      } else if (f_ready) {
        out[r].push_back(forward(f));
        f_end[r][f] = t + 1;
        ++next_f[r];
      } else if (w_ready) {
        out[r].push_back({Phase::kWeight, w, 0});
        ++next_w[r];
      } else {
        continue;
      }
      busy_until[r] = t + 1;
      --remaining;
    }
  }
  return out;
}

}  // namespace

char phaseLetter(PipelinePhase phase) {
  switch (phase) {
    case PipelinePhase::kForward:
      return 'F';
    case PipelinePhase::kBackward:
      return 'B';
    case PipelinePhase::kWeight:
      return 'W';
  }
  return '?';
}

PipelinePlan makePipelinePlan(int ranks, int micro_batches, PipelineSchedule schedule,
                              int virtual_stages) {
  RM_CHECK_ARG(ranks >= 1, fmt::format("pipeline: {} ranks; at least 1 is needed", ranks));
  RM_CHECK_ARG(micro_batches >= 1,
               fmt::format("train.micro_batches: {} is below 1", micro_batches));
  // The spec's rule (spec/strategies/pipeline.h), refused here.
  if (const auto problem = virtualStagesProblem(schedule, virtual_stages))
    RM_THROW(kInvalidArgument, fmt::format("{}: {}", problem->path, problem->message));
  if (const auto problem = microBatchesProblem(schedule, micro_batches, ranks))
    RM_THROW(kInvalidArgument, fmt::format("{}: {}", problem->path, problem->message));
  PipelinePlan plan{schedule, ranks, micro_batches, virtual_stages, {}};
  if (schedule == PipelineSchedule::kZbH1) {
    plan.actions = zeroBubbleH1(ranks, micro_batches);
    return plan;
  }
  for (int r = 0; r < ranks; ++r) {
    switch (schedule) {
      case PipelineSchedule::kGpipe:
        plan.actions.push_back(gpipe(micro_batches));
        break;
      case PipelineSchedule::k1f1b:
        plan.actions.push_back(oneForwardOneBackward(ranks, micro_batches, r));
        break;
      case PipelineSchedule::kInterleaved1f1b:
        plan.actions.push_back(interleaved(ranks, micro_batches, virtual_stages, r));
        break;
      case PipelineSchedule::kZbH1:
        break;
    }
  }
  return plan;
}

double ScheduleTimeline::bubbleFraction() const {
  if (bubble_fraction.empty()) return 0;
  return std::accumulate(bubble_fraction.begin(), bubble_fraction.end(), 0.0) /
         static_cast<double>(bubble_fraction.size());
}

ScheduleTimeline simulateSchedule(const PipelinePlan& plan, const PhaseCosts& costs) {
  // Each virtual stage holds 1/v of the rank's layers: its actions cost 1/v of the phase's.
  const double v = plan.virtual_stages;
  const PhaseCosts per_stage{costs.forward / v, costs.backward / v, costs.weight / v};
  return simulateSchedule(
      plan, std::vector<PhaseCosts>(static_cast<size_t>(plan.modelStages()), per_stage));
}

ScheduleTimeline simulateSchedule(const PipelinePlan& plan,
                                  const std::vector<PhaseCosts>& stage_costs) {
  const int p = plan.ranks, stages = plan.modelStages();
  RM_CHECK_ARG(stage_costs.size() == static_cast<size_t>(stages),
               fmt::format("pipeline replay: {} stage costs for {} model stages",
                           stage_costs.size(), stages));
  for (const PhaseCosts& c : stage_costs)
    RM_CHECK_ARG(std::isfinite(c.forward) && std::isfinite(c.backward) && std::isfinite(c.weight) &&
                     c.forward >= 0 && c.backward >= 0 && c.weight >= 0,
                 "pipeline replay: a stage's cost is negative or not finite");
  const bool split_backward = plan.schedule == PipelineSchedule::kZbH1;
  // End times by (model stage, micro-batch, phase).
  std::map<std::tuple<int, int, Phase>, double> ends;
  auto end_of = [&](int stage, int mb, Phase phase) -> std::optional<double> {
    auto it = ends.find({stage, mb, phase});
    if (it == ends.end()) return std::nullopt;
    return it->second;
  };
  ScheduleTimeline timeline;
  timeline.per_rank.resize(static_cast<size_t>(p));
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> free_at(static_cast<size_t>(p), 0.0), busy(static_cast<size_t>(p), 0.0);
  size_t left = 0;
  for (const auto& list : plan.actions) left += list.size();
  while (left > 0) {
    bool progress = false;
    for (int r = 0; r < p; ++r) {
      const auto& list = plan.actions[static_cast<size_t>(r)];
      while (next[r] < list.size()) {
        const PipelineAction& a = list[next[r]];
        const int stage = plan.modelStage(r, a.chunk);
        const PhaseCosts& costs = stage_costs[static_cast<size_t>(stage)];
        std::vector<std::optional<double>> inputs;
        double cost = 0;
        switch (a.phase) {
          case Phase::kForward:
            if (stage > 0) inputs.push_back(end_of(stage - 1, a.micro_batch, Phase::kForward));
            cost = costs.forward;
            break;
          case Phase::kBackward:
            inputs.push_back(end_of(stage, a.micro_batch, Phase::kForward));
            if (stage < stages - 1)
              inputs.push_back(end_of(stage + 1, a.micro_batch, Phase::kBackward));
            cost = costs.backward;
            break;
          case Phase::kWeight:
            RM_CHECK_ARG(split_backward, "pipeline plan: W actions belong to zb_h1 only");
            inputs.push_back(end_of(stage, a.micro_batch, Phase::kBackward));
            cost = costs.weight;
            break;
        }
        double start = free_at[r];
        bool ready = true;
        for (const auto& input : inputs) {
          if (!input)
            ready = false;
          else
            start = std::max(start, *input);
        }
        if (!ready) break;
        const double end = start + cost;
        ends[{stage, a.micro_batch, a.phase}] = end;
        timeline.per_rank[r].push_back({a, r, start, end});
        free_at[r] = end;
        busy[r] += cost;
        ++next[r];
        --left;
        progress = true;
      }
    }
    RM_CHECK_ARG(progress, fmt::format("pipeline plan ({} ranks, {} micro-batches) deadlocks: no "
                                       "rank can run its next action",
                                       p, plan.micro_batches));
  }
  timeline.makespan = *std::max_element(free_at.begin(), free_at.end());
  for (int r = 0; r < p; ++r) {
    timeline.bubble_fraction.push_back(timeline.makespan > 0 ? 1.0 - busy[r] / timeline.makespan
                                                             : 0.0);
  }
  return timeline;
}

double theoreticalBubbleFraction(PipelineSchedule schedule, int ranks, int micro_batches,
                                 int virtual_stages) {
  const double p = ranks, m = micro_batches, v = virtual_stages;
  switch (schedule) {
    case PipelineSchedule::kGpipe:
    case PipelineSchedule::k1f1b:
      return (p - 1) / (m + p - 1);
    case PipelineSchedule::kInterleaved1f1b:
      return (p - 1) / (v * m + p - 1);
    case PipelineSchedule::kZbH1:
      return (p - 1) / (3 * m + p - 1);
  }
  return 0;
}

}  // namespace ringmaster
