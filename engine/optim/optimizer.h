// Optimizers with PyTorch's update rules (torch.optim.SGD, Adam, AdamW) and global-norm gradient
// clipping (torch.nn.utils.clip_grad_norm_). An optimizer updates the parameters it was given and
// owns their state; the state can be saved to and restored from a checkpoint by name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace ringmaster {

class Optimizer {
 public:
  explicit Optimizer(std::vector<NamedParameter> parameters);
  virtual ~Optimizer() = default;

  virtual void step() = 0;
  void zeroGrad();

  float lr() const { return lr_; }
  void setLr(float lr) { lr_ = lr; }
  // Steps taken so far.
  int64_t stepCount() const { return step_count_; }

  // The state tensors, named "<parameter>.<state>" like PyTorch's per-parameter state keys
  // ("0.weight.exp_avg", "0.weight.momentum_buffer"); empty until the first step for lazy state.
  virtual std::vector<std::pair<std::string, Tensor>> stateTensors() const = 0;
  // Restores what stateTensors() produced, with the step count; missing or misshapen entries are
  // kFormat errors naming the entry.
  virtual void loadState(const std::map<std::string, Tensor>& tensors, int64_t step_count) = 0;

 protected:
  std::vector<NamedParameter> parameters_;
  float lr_ = 0.0f;
  int64_t step_count_ = 0;
};

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<NamedParameter> parameters, const SgdOptions& options);
  void step() override;
  std::vector<std::pair<std::string, Tensor>> stateTensors() const override;
  void loadState(const std::map<std::string, Tensor>& tensors, int64_t step_count) override;

 private:
  SgdOptions options_;
  std::vector<Tensor> momentum_buffers_;  // one per parameter once momentum is used
};

struct AdamOptions {
  float lr = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  // false: Adam (L2 penalty added to the gradient); true: AdamW (decoupled weight decay).
  bool decoupled_weight_decay = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<NamedParameter> parameters, const AdamOptions& options);
  void step() override;
  std::vector<std::pair<std::string, Tensor>> stateTensors() const override;
  void loadState(const std::map<std::string, Tensor>& tensors, int64_t step_count) override;

 private:
  AdamOptions options_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

// Scales all gradients so that their joint L2 norm is at most max_norm, as clip_grad_norm_ does
// (coefficient max_norm / (norm + 1e-6), clamped to 1). Returns the norm before clipping.
double clipGradNorm(const std::vector<NamedParameter>& parameters, double max_norm);
// The scaling of clipGradNorm with the norm already known (for a model spread over ranks, whose
// norm is reduced across them first).
void clipGradientsGivenNorm(const std::vector<NamedParameter>& parameters, double norm,
                            double max_norm);
// The joint L2 norm of all gradients.
double gradNorm(const std::vector<NamedParameter>& parameters);

}  // namespace ringmaster
