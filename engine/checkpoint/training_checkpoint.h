// Training checkpoints: a directory per step holding model.safetensors (parameters named as the
// equivalent nn.Sequential's state_dict, so PyTorch's safetensors loader reads them) and
// optimizer.safetensors (per-parameter state named "<parameter>.<state>", the step in metadata).
// Each file carries a CRC-32 of its tensors in metadata, checked on load; files and the
// directories made for them are owner-only. Which step a run resumes from is the trainer's call;
// this file finds, checks and loads one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"

namespace ringmaster {

// Writes <dir>/step_<step, 8 digits>/{model,optimizer}.safetensors, each atomically; returns the
// step directory. An fp16 run's `scaler` is kept in optimizer.safetensors' metadata (loss_scale,
// loss_scale_growth_tracker). Files are 0600 and every directory it makes (`dir` and its missing
// parents included) 0700, whatever the umask, unless RINGMASTER_UMASK (octal, as for the other
// files ringmaster creates) masks less: 027 gives 0640 and 0750. A directory that exists keeps its
// mode.
std::string saveTrainingCheckpoint(const std::string& dir, int64_t step,
                                   const std::vector<NamedParameter>& parameters,
                                   const Optimizer& optimizer, const GradScaler* scaler = nullptr);

// Writes <dir>/step_<step, 8 digits>/model.safetensors alone (a consolidated copy of a sharded
// model, gathered by the caller); returns the file's path. Modes as saveTrainingCheckpoint's.
std::string saveModelWeights(const std::string& dir, int64_t step,
                             const std::vector<std::pair<std::string, Tensor>>& weights);

// Throws kIo ("checkpoint.dir: cannot write checkpoints to DIR: REASON") unless a file can be
// created in `dir` or, when it does not exist yet, in the nearest existing directory it would be
// made under (a regular file on the way, a read-only file system, missing permission). It tries
// by creating and removing a file, so it holds for root as for anyone; it leaves nothing behind.
void checkCheckpointDirWritable(const std::string& dir);

// Copies weights into `parameters` from a model.safetensors file or a step directory. Every
// parameter must be present with its shape (kFormat error naming the first that is not); extra
// tensors in the file are an error too, since they mean the file is of another model. A file's
// checksum, when it has one, must match (kFormat). For a GPT (a model with "wte.weight") a Hugging
// Face GPT-2 model.safetensors loads as it is: "transformer."-prefixed names, the attention mask
// buffers (h.<i>.attn.bias, .masked_bias) skipped, a tied "lm_head.weight" equal to wte.weight.
void loadModelWeights(const std::string& path, const std::vector<NamedParameter>& parameters);

// Restores the optimizer from an optimizer.safetensors file or a step directory; returns its step.
int64_t loadOptimizerState(const std::string& path, Optimizer& optimizer);

// Loads a whole step directory: both files are read and checked (checksums, the step recorded in
// them against the directory's, every tensor's name and shape) before the parameters change.
// Returns the step. A missing file is kIo, anything else wrong kFormat, each naming the file.
// `scaler` (fp16) takes the scaler state the checkpoint holds; one written without (an fp32 or
// bf16 run resumed in fp16) leaves it as it is, at its initial scale.
int64_t loadTrainingCheckpoint(const std::string& step_dir,
                               const std::vector<NamedParameter>& parameters, Optimizer& optimizer,
                               GradScaler* scaler = nullptr);

// The steps of the step_<8 digits> directories in `dir`, newest first, complete or not; empty
// when there are none or no such directory.
std::vector<int64_t> checkpointSteps(const std::string& dir);
// <dir>/step_<step, 8 digits>: where checkpoint `step` lives.
std::string checkpointStepDir(const std::string& dir, int64_t step);

// A checkpoint passed over when resuming, and why ("optimizer.safetensors is missing (an
// incomplete checkpoint)", or the loader's error).
struct SkippedCheckpoint {
  std::string dir;
  std::string reason;
  bool incomplete = false;  // a file is missing: never finished, rather than damaged
};

// Walks the checkpoints in `dir` of step <= `at_most`, newest first, and loads the first that
// is complete and intact into `parameters` and `optimizer`; returns its step, or nullopt when
// there is none. Each one passed over goes to `skipped`. An incomplete one is never read, so
// when only incomplete ones were skipped nothing has changed; loading a damaged one may have
// changed the optimizer's state before it failed.
std::optional<int64_t> loadNewestGoodCheckpoint(
    const std::string& dir, int64_t at_most, const std::vector<NamedParameter>& parameters,
    Optimizer& optimizer, const std::function<void(const SkippedCheckpoint&)>& skipped,
    GradScaler* scaler = nullptr);

}  // namespace ringmaster
