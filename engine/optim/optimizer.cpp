// SGD, Adam/AdamW and gradient clipping over the fused kernels of tensor/ops.h.
#include "optim/optimizer.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

Tensor stateEntry(const std::map<std::string, Tensor>& tensors, const std::string& name,
                  const Tensor& like) {
  auto it = tensors.find(name);
  if (it == tensors.end()) RM_THROW(kFormat, fmt::format("optimizer state lacks '{}'", name));
  if (it->second.shape() != like.shape() || it->second.dtype() != like.dtype()) {
    RM_THROW(kFormat, fmt::format("optimizer state '{}' is {} {}, expected {} {}", name,
                                  dtypeName(it->second.dtype()), shapeStr(it->second.shape()),
                                  dtypeName(like.dtype()), shapeStr(like.shape())));
  }
  return it->second.to(like.device());
}

}  // namespace

Optimizer::Optimizer(std::vector<NamedParameter> parameters) : parameters_(std::move(parameters)) {}

void Optimizer::zeroGrad() {
  for (auto& named : parameters_) ops::fill(named.parameter->grad, 0.0f);
}

// ---------------------------------------------------------------------------------------------
// SGD

Sgd::Sgd(std::vector<NamedParameter> parameters, const SgdOptions& options)
    : Optimizer(std::move(parameters)), options_(options) {
  RM_CHECK_ARG(options.lr >= 0.0f, fmt::format("SGD learning rate {} is negative", options.lr));
  RM_CHECK_ARG(!options.nesterov || (options.momentum > 0.0f && options.dampening == 0.0f),
               "Nesterov momentum requires a momentum and zero dampening");
  lr_ = options.lr;
}

void Sgd::step() {
  const bool first_step = momentum_buffers_.empty();
  if (options_.momentum != 0.0f && first_step) {
    for (auto& named : parameters_) {
      const Tensor& value = named.parameter->value;
      momentum_buffers_.push_back(Tensor::empty(value.shape(), value.dtype(), value.device()));
    }
  }
  std::vector<ops::SgdTensors> tensors;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& p = *parameters_[i].parameter;
    tensors.push_back(ops::SgdTensors{&p.value, &p.grad,
                                      options_.momentum != 0.0f ? &momentum_buffers_[i] : nullptr});
  }
  ops::sgdStepMulti(tensors, lr_, options_.momentum, options_.dampening, options_.weight_decay,
                    options_.nesterov, first_step);
  step_count_++;
}

std::vector<std::pair<std::string, Tensor>> Sgd::stateTensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < momentum_buffers_.size(); ++i) {
    out.emplace_back(parameters_[i].name + ".momentum_buffer", momentum_buffers_[i]);
  }
  return out;
}

void Sgd::loadState(const std::map<std::string, Tensor>& tensors, int64_t step_count) {
  momentum_buffers_.clear();
  if (options_.momentum != 0.0f && step_count > 0) {
    for (auto& named : parameters_) {
      momentum_buffers_.push_back(
          stateEntry(tensors, named.name + ".momentum_buffer", named.parameter->value));
    }
  }
  step_count_ = step_count;
}

// ---------------------------------------------------------------------------------------------
// Adam / AdamW

Adam::Adam(std::vector<NamedParameter> parameters, const AdamOptions& options)
    : Optimizer(std::move(parameters)), options_(options) {
  RM_CHECK_ARG(options.lr >= 0.0f, fmt::format("Adam learning rate {} is negative", options.lr));
  RM_CHECK_ARG(options.beta1 >= 0.0f && options.beta1 < 1.0f && options.beta2 >= 0.0f &&
                   options.beta2 < 1.0f,
               fmt::format("Adam betas ({}, {}) outside [0, 1)", options.beta1, options.beta2));
  lr_ = options.lr;
  for (auto& named : parameters_) {
    const Tensor& value = named.parameter->value;
    exp_avg_.push_back(Tensor::zeros(value.shape(), value.dtype(), value.device()));
    exp_avg_sq_.push_back(Tensor::zeros(value.shape(), value.dtype(), value.device()));
  }
}

void Adam::step() {
  step_count_++;
  std::vector<ops::AdamTensors> tensors;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    Parameter& p = *parameters_[i].parameter;
    tensors.push_back(ops::AdamTensors{&p.value, &p.grad, &exp_avg_[i], &exp_avg_sq_[i]});
  }
  // One kernel launch for every parameter on CUDA (PyTorch's fused Adam); per tensor on the host.
  ops::adamStepMulti(tensors, lr_, options_.beta1, options_.beta2, options_.eps,
                     options_.weight_decay, step_count_, options_.decoupled_weight_decay);
}

std::vector<std::pair<std::string, Tensor>> Adam::stateTensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    out.emplace_back(parameters_[i].name + ".exp_avg", exp_avg_[i]);
    out.emplace_back(parameters_[i].name + ".exp_avg_sq", exp_avg_sq_[i]);
  }
  return out;
}

void Adam::loadState(const std::map<std::string, Tensor>& tensors, int64_t step_count) {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& value = parameters_[i].parameter->value;
    exp_avg_[i] = stateEntry(tensors, parameters_[i].name + ".exp_avg", value);
    exp_avg_sq_[i] = stateEntry(tensors, parameters_[i].name + ".exp_avg_sq", value);
  }
  step_count_ = step_count;
}

// ---------------------------------------------------------------------------------------------
// Gradient clipping

double gradNorm(const std::vector<NamedParameter>& parameters) {
  double sum = 0.0;
  for (const auto& named : parameters) sum += ops::sumSquares(named.parameter->grad);
  return std::sqrt(sum);
}

double clipGradNorm(const std::vector<NamedParameter>& parameters, double max_norm) {
  const double norm = gradNorm(parameters);
  clipGradientsGivenNorm(parameters, norm, max_norm);
  return norm;
}

void clipGradientsGivenNorm(const std::vector<NamedParameter>& parameters, double norm,
                            double max_norm) {
  RM_CHECK_ARG(max_norm > 0.0, fmt::format("max_norm {} must be positive", max_norm));
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1.0) {
    for (const auto& named : parameters) {
      ops::scale(named.parameter->grad, static_cast<float>(coefficient));
    }
  }
}

}  // namespace ringmaster
