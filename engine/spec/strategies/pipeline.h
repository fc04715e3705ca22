// The pipeline's spec options (strategy.pp.schedule, virtual_stages, stages) and its rules, written
// once: the spec parser reports them as problems, the runtime (parallel/pipeline.cpp,
// spec/strategies/pipeline_schedule.cpp) refuses what breaks them. Its plan is in pipeline.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringmaster {

enum class PipelineSchedule { kGpipe, k1f1b, kInterleaved1f1b, kZbH1 };

// The JSON spelling ("1f1b"); fromString and enumNames are in spec/job_spec.h.
std::string_view toString(PipelineSchedule value);

struct PipelineSpec {
  PipelineSchedule schedule = PipelineSchedule::k1f1b;
  int virtual_stages =
      1;  // model chunks per rank; > 1 only with kInterleaved1f1b, which needs >= 2
  // Explicit partition: stage s (mesh.pp * virtual_stages of them, in model order; stage s runs
  // on pipeline rank s % mesh.pp) holds these block indices (model.h; the MLP's blocks are its
  // Linear layers). Empty: balanced by parameter count.
  std::vector<std::vector<int>> stages;
  bool operator==(const PipelineSpec&) const = default;
};

// A broken pipeline rule: the spec path it concerns (canonical: "strategy.pp.virtual_stages") and
// what is wrong.
struct PipelineRuleProblem {
  std::string path;
  std::string message;
};

// virtual_stages against the schedule: >= 2 for interleaved_1f1b, 1 for the others.
std::optional<PipelineRuleProblem> virtualStagesProblem(PipelineSchedule schedule,
                                                        int virtual_stages);

// micro_batches against the schedule and the pipeline's ranks: interleaved_1f1b runs its
// micro-batches in rounds of one per rank, so it needs a multiple of the ranks.
std::optional<PipelineRuleProblem> microBatchesProblem(PipelineSchedule schedule, int micro_batches,
                                                       int ranks);

// `stages` model stages (each needs a Linear layer) for a model of `linear_layers` of them
// (reported at strategy.mesh.pp). `count_text` says where the count comes from
// ("2 pipeline ranks (strategy.mesh.pp) × virtual_stages 1 = 2").
std::optional<PipelineRuleProblem> stageCountProblem(int64_t stages, std::string_view count_text,
                                                     int64_t linear_layers);

// An explicit partition (`partition[s]`: the model block indices of stage s) for `stages`
// stages of a model of `linear_layers`: one entry per stage, layers 0..linear_layers-1 in order,
// each once. `stages_origin` says where the count comes from ("2 pipeline ranks (strategy.mesh.pp)
// × virtual_stages 1").
std::optional<PipelineRuleProblem> partitionProblem(const std::vector<std::vector<int>>& partition,
                                                    int64_t stages, std::string_view stages_origin,
                                                    int64_t linear_layers);

// Contiguous split of `weights` into `parts` non-empty runs whose largest sum is smallest (the
// balanced partition by parameter count); the index of the first weight of each run.
std::vector<size_t> balancedSplit(const std::vector<int64_t>& weights, int parts);

}  // namespace ringmaster
