// The layout advisor's enumeration (issue 37): every layout of a job spec's world that the spec
// validation accepts (mesh dp x tp x pp, dp as DDP or an FSDP sharding, the pipeline schedule and
// micro-batches, activation checkpointing, precision), each as the spec overrides a sweep member
// runs it with, its memory estimate per rank, and the layouts dropped for exceeding the device's
// memory. It ranks nothing and measures nothing: the cost model is layout_cost.h.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/job_spec.h"

namespace ringmaster::plan {

// One layout of the world's ranks. The global batch (train.batch_size x mesh.dp of the base spec)
// stays the same in every layout: batch_size is the base's global batch over this layout's dp.
struct Layout {
  MeshSpec mesh;
  std::string dp_kind = "ddp";               // strategy.dp.kind: "ddp" or "fsdp"
  std::optional<FsdpSharding> sharding;      // fsdp only
  std::optional<PipelineSchedule> schedule;  // pp > 1 only
  int virtual_stages = 1;                    // > 1 only with interleaved_1f1b
  int micro_batches = 1;                     // train.micro_batches (1 without a pipeline)
  int batch_size = 1;                        // train.batch_size: samples per dp replica
  bool sequence_parallel = false;            // strategy.tp.sequence_parallel (tp > 1 only)
  bool checkpointing = false;                // train.activation_checkpointing
  Precision precision = Precision::kFp32;    // train.precision

  // "dp2 tp1 pp2 fsdp:full_shard 1f1b m4 ckpt bf16" ("tp2sp" with sequence parallelism): every
  // choice, in one word each.
  std::string label() const;
  // The data-parallel choice alone: "ddp", "fsdp:full_shard", or "-" with dp = 1.
  std::string dpMode() const;
  bool operator==(const Layout&) const = default;
};

// Dotted spec field -> JSON value, in a fixed order: what session::applyOverrides takes (as
// "field=<json>", overrideAssignments) and what a sweep member stores (as one JSON object,
// overridesObject).
using SpecOverrides = std::vector<std::pair<std::string, nlohmann::json>>;

// The overrides that make a base spec run `layout`: strategy.mesh.{dp,tp,pp}; strategy.dp,
// strategy.tp and strategy.pp as whole blocks ({"kind"[, "sharding"]}, {["sequence_parallel"]},
// {["schedule", "virtual_stages"]}: empty where the dimension is 1), so that no option of the
// base's own layout (an explicit pipeline partition, another plan's options) stays behind; and
// train.batch_size, micro_batches, activation_checkpointing, precision.
SpecOverrides layoutOverrides(const Layout& layout);
std::vector<std::string> overrideAssignments(const SpecOverrides& overrides);
nlohmann::json overridesObject(const SpecOverrides& overrides);

// What the enumeration may choose from: the precisions the device computes in (fp32, bf16 on the
// CPU as the engine widens it; fp32, bf16, fp16 on CUDA), the micro-batch counts tried per
// pipeline (multiples of pp), and the FSDP shardings.
struct LayoutChoices {
  std::vector<Precision> precisions;
  std::vector<int> micro_batch_factors = {1, 2, 4};  // micro_batches = factor x pp
  std::vector<FsdpSharding> shardings = {FsdpSharding::kFullShard, FsdpSharding::kShardGradOp};
  std::vector<PipelineSchedule> schedules = {PipelineSchedule::kGpipe, PipelineSchedule::k1f1b,
                                             PipelineSchedule::kInterleaved1f1b,
                                             PipelineSchedule::kZbH1};
  bool sequence_parallel = false;  // the base's strategy.tp option, kept where tp > 1
};
// Whether the spec's ranks compute on CUDA: `cuda`, or `auto` where this host has a device (the
// ranks resolve `auto` so: train/trainer.cpp). Asks the driver only for `auto`.
bool computesOnCuda(const JobSpec& spec);
// The choices for the spec's device: on the CPU fp32 and bf16; on CUDA fp32, bf16 and fp16; the
// base spec's sequence parallelism.
LayoutChoices defaultChoices(const JobSpec& spec);

// Every combination the choices give over `world` ranks (mesh factorisations in dp-major order,
// dp modes only where dp > 1, schedules and micro-batches only where pp > 1), before any check.
// Combinations whose batch does not split (the global batch over dp) are left out here.
std::vector<Layout> candidateLayouts(int world, int64_t global_batch, const LayoutChoices& choices);

// A layout the spec validation accepted, with the spec it gives and its memory estimate.
struct PlannedLayout {
  Layout layout;
  // layoutOverrides(layout), after {"strategy": the base's strategy in the mesh form} where the
  // base document has the legacy form (strategy.kind), which a mesh cannot be set beside.
  SpecOverrides overrides;
  JobSpec spec;
  double memory_bytes = 0;  // the most any rank needs (spec/memory_estimate.h)
  int memory_rank = 0;      // that rank
  // Set when it was dropped: the estimate against the device memory, in words with the figures.
  std::optional<std::string> dropped;
};

// A combination the spec validation refused, with its first problem ("path: message").
struct RefusedLayout {
  Layout layout;
  std::string problem;
};

struct LayoutEnumeration {
  JobSpec base;                         // the base document's spec
  int64_t global_batch = 0;             // samples per optimizer micro-step over all replicas
  std::vector<PlannedLayout> layouts;   // valid: kept and dropped, in candidate order
  std::vector<RefusedLayout> refused;   // refused by the validation
  std::optional<double> device_memory;  // per rank, bytes; nullopt: unknown (nothing dropped)
  std::string device_memory_source;     // "host memory 15.6 GiB / 4 ranks", "given"
};

// The problems of the base document with `overrides` applied as a sweep member's are
// (session::applyOverrides, then the spec parser); empty when it validates.
std::vector<SpecProblem> validateWithOverrides(const nlohmann::json& base_document,
                                               const SpecOverrides& overrides);

// Enumerates the base document's layouts over its world size: each candidate applied to the
// document and validated (so exactly what the spec accepts is listed), its memory estimated, and
// dropped where that exceeds `device_memory` (per rank; nullopt: deviceMemoryPerRank). Throws
// kSpec when the base document itself does not validate, kInvalidArgument for a program job.
LayoutEnumeration enumerateLayouts(const nlohmann::json& base_document,
                                   std::optional<double> device_memory = std::nullopt,
                                   std::optional<LayoutChoices> choices = std::nullopt);

// The memory one rank has, with where the figure comes from: on the CPU the host's MemTotal
// (/proc/meminfo) over the most ranks any host runs; nullopt on CUDA (no device is asked before
// launch: give it) and where /proc/meminfo cannot be read.
std::optional<std::pair<double, std::string>> deviceMemoryPerRank(const JobSpec& spec);

}  // namespace ringmaster::plan
