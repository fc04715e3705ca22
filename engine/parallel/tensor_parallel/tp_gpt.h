// The GPT under tensor parallelism (Megatron-LM, Shoeybi et al. 2019): the plain GPT (nn/gpt.h)
// built whole from its seed on every rank, then each rank's slices moved into the tensor-parallel
// layers (layers.h): vocabulary rows of wte, heads of c_attn and attn.c_proj, hidden columns of
// the MLP; LayerNorms, wpe and the row-parallel biases replicated. Its parameters have the plain
// GPT's names, each holding the local slice; shardOfParameter / gatherFullParameter map between a
// full parameter and the slices (a consolidated checkpoint is the plain GPT's). The loss on its
// logits is VocabParallelCrossEntropy (vocab_parallel_cross_entropy.h); under sequence parallelism
// the runtime calls reduceSequenceParallelGradients once a step after the backwards.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "spec/job_spec.h"

namespace ringmaster {

// Problems with tensor-parallelising `config` over `tp_size` ranks (paths as the spec's):
// heads and vocab_size multiples of tp ("strategy.mesh.tp"), and under sequence parallelism the
// context too ("strategy.tp.sequence_parallel").
std::vector<ModelProblem> validateTensorParallelGpt(const GptConfig& config, int tp_size,
                                                    const TensorParallelSpec& spec);

// This rank's GPT: blocks "embedding", "h.0" ... "head" as buildGpt's, the embedding's wte rows
// [r V / tp, (r + 1) V / tp) tied to the head; its input is the whole batch's token ids [B, T] on
// every rank of `tp`, its output the rank's logits [B, T, V / tp]. Under sequence parallelism the
// activations between blocks are sequence shards (the blocks' shapes say {T / tp, C}). Attention
// dropout draws a stream per tp rank; the residual and embedding dropouts one stream shared by the
// ranks (without sequence parallelism: the plain GPT's masks) or, on sequence shards, one per
// rank. The blocks' parameter counts are the rank's. Invalid configs are kInvalidArgument
// (validateTensorParallelGpt's first problem). `tp` must outlive the model.
std::unique_ptr<Sequential> buildTensorParallelGpt(const GptConfig& config, Communicator& tp,
                                                   const TensorParallelSpec& spec,
                                                   Device device = Device::cpu());

// The loss for the model's logits: a VocabParallelCrossEntropy from this rank's first id.
std::unique_ptr<LossFunction> makeTensorParallelGptLoss(const GptConfig& config, Communicator& tp);

// Rank `tp_rank`'s slice of the plain GPT's parameter `name` (value `full`, as buildGpt's).
Tensor shardOfParameter(const std::string& name, const Tensor& full, int tp_rank, int tp_size,
                        const GptConfig& config);
// The inverse: the full parameter from every rank's `local` slice. Collective over `tp` (every
// rank calls it for the same names in the same order); replicated parameters come back as a copy.
Tensor gatherFullParameter(const std::string& name, const Tensor& local, Communicator& tp,
                           const GptConfig& config);

// Whether every tensor-parallel rank holds the whole parameter `name` (LayerNorms, wpe, the
// row-parallel biases attn.c_proj.bias and mlp.c_proj.bias): what a gradient norm over the tp
// ranks counts once.
bool isTensorParallelReplicated(const std::string& name);

// Under sequence parallelism each rank's gradients of the replicated parameters hold its tokens'
// share: sums them over `tp` (all-reduce). Call once a step, after the last backward (after
// gradient accumulation and before clipping and the optimizer); without sequence parallelism it
// does nothing (those gradients are already whole and equal on the ranks).
void reduceSequenceParallelGradients(const std::vector<NamedParameter>& parameters,
                                     Communicator& tp, const TensorParallelSpec& spec);

}  // namespace ringmaster
