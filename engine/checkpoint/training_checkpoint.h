// Training checkpoints: a directory per step holding model.safetensors (parameters named as the
// equivalent nn.Sequential's state_dict, so PyTorch's safetensors loader reads them) and
// optimizer.safetensors (per-parameter state named "<parameter>.<state>", the step in metadata).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "optim/optimizer.h"

namespace ringmaster {

// Writes <dir>/step_<step, 8 digits>/{model,optimizer}.safetensors, each atomically; returns the
// step directory.
std::string saveTrainingCheckpoint(const std::string& dir, int64_t step,
                                   const std::vector<NamedParameter>& parameters,
                                   const Optimizer& optimizer);

// Writes <dir>/step_<step, 8 digits>/model.safetensors alone (a consolidated copy of a sharded
// model, gathered by the caller); returns the file's path.
std::string saveModelWeights(const std::string& dir, int64_t step,
                             const std::vector<std::pair<std::string, Tensor>>& weights);

// Copies weights into `parameters` from a model.safetensors file or a step directory. Every
// parameter must be present with its shape (kFormat error naming the first that is not); extra
// tensors in the file are an error too, since they mean the file is of another model.
void loadModelWeights(const std::string& path, const std::vector<NamedParameter>& parameters);

// The step directory of the highest step in `dir` holding both files, or nullopt when there is
// none (or no such directory).
std::optional<std::string> newestCheckpoint(const std::string& dir);
// That step's number.
std::optional<int64_t> newestCheckpointStep(const std::string& dir);
// <dir>/step_<step, 8 digits>: where checkpoint `step` lives.
std::string checkpointStepDir(const std::string& dir, int64_t step);

// Restores the optimizer from an optimizer.safetensors file or a step directory; returns its step.
int64_t loadOptimizerState(const std::string& path, Optimizer& optimizer);

}  // namespace ringmaster
