// The layout advisor's cost model (issue 37): a layout's predicted step time as compute (the
// model's training FLOPs over the device's measured FLOP/s), communication per mesh dimension
// (the bytes its plan moves over the bandwidth measured for that group size) and the pipeline
// bubble (the planned schedule played with the stage's compute), and the ranking by predicted
// tokens/s (samples/s for a model without tokens). The measurements are inputs here
// (layout_probes.h takes them); docs/sweeps.md ("The layout advisor") has the formulas.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/layout_plan.h"
#include "spec/mesh_layout.h"

namespace ringmaster::plan {

// One collective's time against its message size on groups of `ranks` ranks:
// seconds = latency_s + bytes / bytes_per_s (bytes as nccl-tests counts them: the buffer).
struct CommCurve {
  std::string op;  // "all_reduce", "all_gather", "reduce_scatter", "sendrecv"
  int ranks = 2;
  double latency_s = 0;
  double bytes_per_s = 0;  // algorithm bandwidth of large messages
  double seconds(double bytes, double operations) const;
};

// What the cost model needs to know of the hosts: each precision's matrix-product throughput of
// one rank while every rank of its host computes, and the collectives' curves per group size.
struct Measurements {
  std::map<Precision, double> flops_per_s;
  std::vector<CommCurve> curves;
  // The curve of `op` on `ranks` ranks, else on the nearest group size measured (measureHosts
  // measures every size a mesh of the world can have); throws kUnavailable when none of `op`.
  const CommCurve& curve(const std::string& op, int ranks) const;
  nlohmann::json toJson() const;
  static Measurements fromJson(const nlohmann::json& json);  // kFormat when malformed
};

// One mesh dimension's communication in a step: bytes and operations on one rank, the time the
// curve gives them, and the formula in words.
struct DimensionCost {
  MeshDim dim = MeshDim::kDp;
  std::string op;  // the collective the time is taken from
  int ranks = 1;   // its group size
  double bytes = 0;
  double operations = 0;
  double seconds = 0;
  std::string formula;
};

struct StepPrediction {
  double compute_s = 0;  // the busiest rank's matrix products (forward, backward, re-run)
  double bubble_s = 0;   // its idle time in the planned schedule (0 without a pipeline)
  std::vector<DimensionCost> comm;  // each non-trivial dimension (dp, tp, pp), none exposed-hidden
  double step_s = 0;                // compute + bubble + every dimension's communication
  double samples_per_step = 0;      // the global batch x gradient accumulation
  double tokens_per_sample = 1;     // 1 for a model without tokens (then rates are samples/s)
  bool has_tokens = false;
  double rate() const;  // tokens/s (samples/s without tokens)
  double commSeconds() const;
  std::optional<double> commSeconds(MeshDim dim) const;
};

// The prediction for one valid layout's spec. Throws kUnavailable when a measurement it needs is
// missing (a precision not probed, a collective not measured).
StepPrediction predictStep(const JobSpec& spec, const Measurements& measured);

// The pipeline's planned busy and idle time of its busiest rank, in units of one micro-batch's
// forward on a stage: F = 1, B = 2 (3 with checkpointing's re-run; with zb_h1 B = 1 (2) and W =
// 1), played by simulateSchedule. {busy, makespan}.
std::pair<double, double> pipelineUnits(const JobSpec& spec);

// The enumeration ranked: each kept layout's prediction, best rate first; dropped layouts keep
// their place after them, unpredicted.
struct RankedLayout {
  PlannedLayout planned;
  std::optional<StepPrediction> prediction;
};
std::vector<RankedLayout> rankLayouts(const LayoutEnumeration& layouts,
                                      const Measurements& measured);

// The top `k` ranked layouts as sweep members, in rank order (member position i is the (i+1)-th
// best): each one's overrides in their order, the type session::MemberOverrides is
// (session/sweep/sweep_plan.h), so the sweep runner runs them as they are.
std::vector<SpecOverrides> topLayoutMembers(const std::vector<RankedLayout>& ranked, int k);

// The plan as JSON (`ringmaster plan --json`, docs/sweeps.md): {"world", "global_batch",
// "device_memory", "device_memory_source", "measurements", "layouts": [{"rank" | null, "top",
// "label", "mesh", "dp_mode", "schedule", "virtual_stages", "micro_batches", "batch_size",
// "checkpointing", "precision", "overrides", "memory_bytes", "memory_rank", "dropped",
// "prediction": {"step_ms", "compute_ms", "bubble_ms", "comm": [{dim, op, ranks, bytes,
// operations, ms, formula}], "rate", "rate_unit"} | null}], "refused": [{"label", "problem"}]}.
nlohmann::json planJson(const LayoutEnumeration& layouts, const std::vector<RankedLayout>& ranked,
                        const Measurements& measured, int top);

}  // namespace ringmaster::plan
