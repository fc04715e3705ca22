// The GPT's projection layer and its causal self-attention: Conv1D (Hugging Face GPT-2's Linear
// with its weight stored [in, out]), TokenLayerNorm (LayerNorm over the last axis of [B, T, C],
// bias optional), AttentionCore (the heads: causal softmax and attention dropout between the q/k/v
// projection and the output projection) and CausalSelfAttention (fused q/k/v projection, the
// heads, output projection, residual dropout). Activations are [B, T, C]; the sizes a
// tensor-parallel split would shard (local heads, projection widths) are constructor arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/layers.h"
#include "nn/module.h"

namespace ringmaster {

// How a GPT layer draws its initial weights: N(0, std) weights, zero biases.
struct GptInit {
  uint64_t seed = 0;
  double std = 0.02;
};

// The contexts of a composite module's children, one after another, and back: restoring reads
// from `context` at `offset` as many tensors as each child saves and returns the offset after.
std::vector<Tensor> childContexts(const std::vector<Module*>& children);
size_t restoreChildContexts(const std::vector<Module*>& children,
                            const std::vector<Tensor>& context, size_t offset = 0);

// A normal N(0, std) tensor from `seed` (deterministic on every device).
Tensor normalTensor(const Shape& shape, double std, uint64_t seed, Device device);

// y = x W + b over the last axis of x [..., in], W [in, out] (GPT-2's Conv1D layout), b [out]
// when `bias`. Honours autocast as Linear does (nn/autocast.h).
class Conv1D : public Module {
 public:
  Conv1D(int64_t in_features, int64_t out_features, bool bias, GptInit init,
         Device device = Device::cpu());
  std::string typeName() const override { return "Conv1D"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return {input_}; }
  void restoreContext(const std::vector<Tensor>& context) override { input_ = context.at(0); }
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  // Under autocast the output is rounded through the 16-bit format (the default). A row-parallel
  // layer's partial products are not: it rounds their sum (parallel/tensor_parallel/layers.h).
  void setRoundsOutput(bool rounds) { rounds_output_ = rounds; }

  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }

 private:
  Parameter weight_;  // [in, out]
  Parameter bias_;    // [out]; undefined without bias
  Tensor input_;      // [..., in], from the last forward (16-bit under autocast)
  bool rounds_output_ = true;
};

// LayerNorm over the last axis (eps 1e-5, weight 1, bias 0), for [..., C] activations; without
// `bias` it has no bias parameter (nanoGPT's bias = False).
class TokenLayerNorm : public Module {
 public:
  TokenLayerNorm(int64_t features, bool bias, Device device = Device::cpu());
  std::string typeName() const override { return "LayerNorm"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return {input_, mean_, rstd_}; }
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

 private:
  bool has_bias_;
  Parameter weight_;  // [C]
  Parameter bias_;    // [C]; without bias a zero tensor and a scratch gradient, not a parameter
  Tensor input_, mean_, rstd_;
};

// The heads' part of GPT-2's attention, between c_attn and c_proj: qkv [B, T, 3 H D] split into
// q, k, v per head, softmax(q k^T / sqrt(D)) with the causal mask, attention dropout, y = probs v,
// heads concatenated [B, T, H D]. `heads` is the heads computed here (all of them, or a
// tensor-parallel rank's). Under autocast its products take 16-bit operands and the softmax runs
// in fp32 on the rounded scores; q, k, v and the probabilities are kept 16-bit (the softmax
// backward reads the widened 16-bit probabilities).
class AttentionCore : public Module {
 public:
  AttentionCore(int64_t heads, int64_t head_dim, float dropout, uint64_t dropout_seed);
  std::string typeName() const override { return "AttentionCore"; }
  Tensor forward(const Tensor& qkv) override;  // [B, T, 3 H D] -> [B, T, H D]
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override;
  void restoreContext(const std::vector<Tensor>& context) override;
  void forEachChild(const std::function<void(Module&)>& visit) override { visit(attn_dropout_); }
  void setTraining(bool training) override;

 private:
  int64_t heads_, head_dim_;
  Dropout attn_dropout_;
  // Kept for the backward; 16-bit under autocast.
  Tensor q_, k_, v_;  // [B, H, T, D]
  Tensor probs_;      // [B, H, T, T], the softmax
  Tensor attended_;   // [B, H, T, T], after the attention dropout (probs_ itself without it)
};

// Masked multi-head self-attention, GPT-2's: qkv = c_attn(x), the heads (AttentionCore), c_proj,
// residual dropout. `heads` is the heads this module computes (all of them, or a tensor-parallel
// rank's).
class CausalSelfAttention : public Module {
 public:
  struct Options {
    int64_t dim = 0;       // C, the residual width (c_attn's input, c_proj's output)
    int64_t heads = 0;     // heads computed here
    int64_t head_dim = 0;  // D
    float dropout = 0.0f;
    bool bias = true;
    GptInit init;       // c_attn's weights
    GptInit proj_init;  // c_proj's weights (GPT-2 scales them by 1/sqrt(2 layers))
    uint64_t dropout_seed = 0;
  };
  CausalSelfAttention(const Options& options, Device device = Device::cpu());
  std::string typeName() const override { return "CausalSelfAttention"; }
  Tensor forward(const Tensor& input) override;  // [B, T, C] -> [B, T, C]
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return childContexts(children()); }
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override;
  void setTraining(bool training) override;

 private:
  std::vector<Module*> children() const;

  Conv1D c_attn_;
  AttentionCore core_;
  Conv1D c_proj_;
  Dropout resid_dropout_;
};

}  // namespace ringmaster
