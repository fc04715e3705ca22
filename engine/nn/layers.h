// The layers of an MLP: Linear, ReLU, GELU, Dropout, LayerNorm, the Sequential container and the
// Residual wrapper. Their definitions and default initialisations are PyTorch's (nn.Linear's
// kaiming-uniform with a = sqrt(5), exact-erf GELU, inverted dropout, biased-variance LayerNorm
// with eps 1e-5).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/model.h"
#include "nn/module.h"

namespace ringmaster {

// y = x W^T + b with W [out, in]. Weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)), as nn.Linear.
// Honours autocast (Module::computeDType(), nn/autocast.h): 16-bit operands, output rounded.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, uint64_t seed, Device device = Device::cpu());
  std::string typeName() const override { return "Linear"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  // dx = dy W now; dW and db later, from the kept dy.
  Tensor backwardInput(const Tensor& grad_output) override;
  void backwardWeights() override;
  void setInputGradientNeeded(bool needed) override { input_gradient_needed_ = needed; }
  std::vector<Tensor> saveContext() const override { return {input_, grad_output_}; }
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }

 private:
  Parameter weight_;    // [out, in]
  Parameter bias_;      // [out]
  Tensor input_;        // [batch, in], from the last forward (16-bit under autocast)
  Tensor grad_output_;  // [batch, out], between backwardInput and backwardWeights (likewise)
  bool input_gradient_needed_ = true;  // false: backward returns no dx (the input is data)
};

class ReLU : public Module {
 public:
  std::string typeName() const override { return "ReLU"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return {input_}; }
  void restoreContext(const std::vector<Tensor>& context) override { input_ = context.at(0); }

 private:
  Tensor input_;
};

// GELU with the exact erf form (approximate = "none").
class GELU : public Module {
 public:
  std::string typeName() const override { return "GELU"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return {input_}; }
  void restoreContext(const std::vector<Tensor>& context) override { input_ = context.at(0); }

 private:
  Tensor input_;
};

// Inverted dropout: in training, each element is zeroed with probability p and the rest scaled by
// 1/(1-p); in eval mode it is the identity. The k-th forward of a module seeded s draws its mask
// from the counter-based stream (s, k), so runs are reproducible and CPU and CUDA agree.
class Dropout : public Module {
 public:
  Dropout(float p, uint64_t seed);
  std::string typeName() const override { return "Dropout"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return {mask_}; }
  void restoreContext(const std::vector<Tensor>& context) override { mask_ = context.at(0); }
  // The number of masks drawn so far; part of a checkpoint's state for exact resumption.
  uint64_t calls() const { return calls_; }
  void setCalls(uint64_t calls) { calls_ = calls; }
  // The stream its masks come from (a tensor-parallel model derives its ranks' streams from it).
  uint64_t seed() const { return seed_; }

 private:
  float p_;
  uint64_t seed_;
  uint64_t calls_ = 0;
  Tensor mask_;  // 0 or 1/(1-p) per element, from the last training forward; undefined in eval
};

// Normalises each row over its last dimension: y = (x - mean) / sqrt(var + eps) * weight + bias.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t features, float eps = 1e-5f, Device device = Device::cpu());
  std::string typeName() const override { return "LayerNorm"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return {input_, mean_, rstd_}; }
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

 private:
  float eps_;
  Parameter weight_;  // [features], ones
  Parameter bias_;    // [features], zeros
  Tensor input_, mean_, rstd_;
};

// What a checkpointed block keeps between its forward and its backward instead of its children's
// contexts: its input and the mask counters of the Dropouts inside it (the recompute draws the
// same masks). An undefined input: the block is not checkpointed (its children hold theirs).
struct BlockCheckpoint {
  Tensor input;
  std::vector<uint64_t> dropout_calls;
};

// What children [first, end) of a Sequential keep between forward and backward (and between
// backwardInput and backwardWeights): each child's context and the checkpoints of the blocks
// in the range, so that a pipeline can hold several micro-batches' at once.
struct ChildrenContext {
  std::vector<std::vector<Tensor>> children;
  std::vector<BlockCheckpoint> checkpoints;  // one per block in the range
};

// Runs its children in order; parameters are named by child index like nn.Sequential (or by
// the name a child was appended with). A model's
// builder groups the children into the blocks its description declares (nn/model.h).
//
// Activation checkpointing (torch.utils.checkpoint around each block): when on, in training, a
// block's forward keeps only its input and its Dropouts' counters (the children's contexts are
// dropped after its last child), and the backward of its last child first re-runs the block's
// forward from that input with the counters rewound, so the gradients equal those without it.
// Strategies that run the children one at a time go through forwardChild / backwardChild /
// backwardInputChild and save / restore contexts with saveChildContexts / restoreChildContexts.
class Sequential : public Module {
 public:
  std::string typeName() const override { return "Sequential"; }
  void append(std::unique_ptr<Module> module);
  // A child whose parameters are named "<name>.<own name>" ("h.0.attn.c_attn.weight"), or by their
  // own names alone when `name` is empty ("wte.weight"), as Hugging Face models name them.
  void append(std::unique_ptr<Module> module, const std::string& name);
  // What child `index`'s parameter names are prefixed with in namedParameters(): "3." or "h.0.".
  const std::string& childPrefix(size_t index) const { return prefixes_.at(index); }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override;
  void setTraining(bool training) override;
  // To the first child (the one that reads the model's input).
  void setInputGradientNeeded(bool needed) override;

  // Needs the blocks set (setBlocks) to turn on.
  void setActivationCheckpointing(bool on);
  bool activationCheckpointing() const { return checkpointing_; }
  // Child m's forward and backward as part of its block (see above); without checkpointing they
  // are child(m).forward / backward / backwardInput.
  Tensor forwardChild(size_t m, const Tensor& input);
  Tensor backwardChild(size_t m, const Tensor& grad_output);
  Tensor backwardInputChild(size_t m, const Tensor& grad_output);
  // [first, end) must start and end on block boundaries when checkpointing is on.
  ChildrenContext saveChildContexts(size_t first, size_t end) const;
  void restoreChildContexts(size_t first, const ChildrenContext& context);

  size_t size() const { return children_.size(); }
  Module& child(size_t index) { return *children_.at(index); }
  // The blocks the children form: contiguous, in order, covering every child (checked).
  void setBlocks(std::vector<ModelBlock> blocks);
  const std::vector<ModelBlock>& blocks() const { return blocks_; }

 private:
  Tensor backwardChild(size_t m, const Tensor& grad_output, bool keep_for_weights);
  void recompute(size_t block);
  void dropContexts(size_t first, size_t end);
  std::vector<Dropout*> dropouts(size_t block);

  std::vector<std::unique_ptr<Module>> children_;
  std::vector<std::string> prefixes_;  // per child, see childPrefix
  std::vector<ModelBlock> blocks_;
  std::vector<size_t> block_of_child_;  // index into blocks_, per child
  bool checkpointing_ = false;
  std::vector<BlockCheckpoint> checkpoints_;  // per block, under checkpointing
};

// y = x + branch(x); the branch's parameters are named as its own children ("<i>.weight" under
// this module's prefix). Its context is the branch children's contexts, concatenated.
class Residual : public Module {
 public:
  explicit Residual(std::unique_ptr<Sequential> branch);
  std::string typeName() const override { return "Residual"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override;
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override { visit(*branch_); }
  void setTraining(bool training) override;

 private:
  std::unique_ptr<Sequential> branch_;
};

}  // namespace ringmaster
