// The GPT-2 language model a job spec's model section describes (kind "gpt"): token and position
// embedding, pre-LayerNorm transformer blocks, a final LayerNorm and the LM head tied to the token
// embedding, named and laid out as Hugging Face's GPT-2 ("wte.weight", "h.0.attn.c_attn.weight"
// in Conv1D layout [in, out], ...) so that its safetensors load as they are.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/layers.h"
#include "nn/model.h"

namespace ringmaster {

struct GptConfig {
  int64_t vocab_size = 0;
  int64_t context = 0;  // tokens per sample
  int64_t layers = 0;   // transformer blocks
  int64_t heads = 0;
  int64_t dim = 0;  // a multiple of heads
  float dropout = 0.0f;
  bool bias = true;
  uint64_t seed = 0;

  int64_t headDim() const { return dim / heads; }
};

GptConfig gptConfig(const ModelSpec& spec);

// Problems with a config (paths under "model"): positive sizes, dim a multiple of heads. (The
// spec parser bounds each size and the parameter count.)
std::vector<ModelProblem> validateGpt(const GptConfig& config);

// Parameters in Hugging Face GPT-2 order (the tied LM head once, as "wte.weight"); blocks
// "embedding", "h.0" .. "h.{layers-1}", "head"; per-sample input {context} int32 token ids and
// output {context, vocab_size} logits; forward FLOPs per sample context * (2N + 4 * layers *
// context * dim), N the parameters without the position embedding (PaLM's count: training is
// 3x that, 6N + 12 * layers * context * dim per token). The activation bytes are those the modules
// keep under `compute` (autocast: 16-bit operands of the products at 2 bytes an element). Under a
// tensor-parallel `share`, what one of its ranks holds (Megatron-LM's split): the heads, the MLP's
// hidden units and the vocabulary (wte's rows, the logits) divided among the ranks, the
// LayerNorms, wpe and the projections' biases whole; the parameters keep their names.
ModelDescription describeGpt(const GptConfig& config, DType compute = DType::kF32,
                             const TensorParallelShare& share = {});

// Initialised as GPT-2 / nanoGPT from config.seed: weights N(0, 0.02), the residual projections
// (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 * layers)), biases 0, LayerNorms 1 and 0.
std::unique_ptr<Sequential> buildGpt(const GptConfig& config, Device device = Device::cpu());

// The registration of kind "gpt".
ModelDefinition gptModel();

}  // namespace ringmaster
