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
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, uint64_t seed, Device device = Device::cpu());
  std::string typeName() const override { return "Linear"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  // dx = dy W now; dW and db later, from the kept dy.
  Tensor backwardInput(const Tensor& grad_output) override;
  void backwardWeights() override;
  std::vector<Tensor> saveContext() const override { return {input_, grad_output_}; }
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;

  Parameter& weight() { return weight_; }
  Parameter& bias() { return bias_; }

 private:
  Parameter weight_;    // [out, in]
  Parameter bias_;      // [out]
  Tensor input_;        // [batch, in], from the last forward
  Tensor grad_output_;  // [batch, out], between backwardInput and backwardWeights
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

// Runs its children in order; parameters are named by child index like nn.Sequential. A model's
// builder groups the children into the blocks its description declares (nn/model.h).
class Sequential : public Module {
 public:
  std::string typeName() const override { return "Sequential"; }
  void append(std::unique_ptr<Module> module);
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void setTraining(bool training) override;

  size_t size() const { return children_.size(); }
  Module& child(size_t index) { return *children_.at(index); }
  // The blocks the children form: contiguous, in order, covering every child (checked).
  void setBlocks(std::vector<ModelBlock> blocks);
  const std::vector<ModelBlock>& blocks() const { return blocks_; }

 private:
  std::vector<std::unique_ptr<Module>> children_;
  std::vector<ModelBlock> blocks_;
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
  void setTraining(bool training) override;

 private:
  std::unique_ptr<Sequential> branch_;
};

}  // namespace ringmaster
