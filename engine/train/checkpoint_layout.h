// Which layout wrote a checkpoint directory (<dir>/layout.json: the mesh and the data-parallel
// plan, written by rank 0 of every run that checkpoints there), and resuming a run of another
// layout: its per-rank checkpoints hold another split of the model, so the run starts from the
// newest consolidated model.safetensors (checkpoint.consolidate, or a replicated layout's own
// checkpoint), which any layout slices for itself, and the optimizer state starts afresh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nn/module.h"
#include "spec/job_spec.h"

namespace ringmaster {

// "dp 2 x tp 1 x pp 2, dp as fsdp": what layout.json records, as the messages name it.
std::string checkpointLayoutText(const JobSpec& spec);

// The layout recorded in `dir`, or nullopt when none is (a directory of a run before layouts were
// recorded: taken to be this run's). Throws kFormat naming the file when it cannot be read.
std::optional<std::string> recordedCheckpointLayout(const std::string& dir);

// Writes <dir>/layout.json for `spec` (0600, atomically).
void recordCheckpointLayout(const std::string& dir, const JobSpec& spec);

// With checkpoint.resume, when `dir` records another layout than the spec's: loads the newest
// consolidated model.safetensors of `dir` into `parameters` (the whole model's, before any
// strategy splits it) and returns its step, with `note` saying what happened. nullopt: the same
// layout (or none recorded), for the per-rank resume. Throws kFormat when the layouts differ and
// no consolidated checkpoint is there.
std::optional<int64_t> resumeFromOtherLayout(const std::string& dir, const JobSpec& spec,
                                             const std::vector<NamedParameter>& parameters,
                                             std::string& note);

}  // namespace ringmaster
