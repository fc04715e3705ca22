// Forward and backward of the MLP layers, on whichever device their tensors live.
#include "nn/layers.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "nn/autocast.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

void checkRows(const Tensor& input, int64_t features, const char* layer) {
  RM_CHECK_ARG(input.rank() == 2 && input.dim(1) == features,
               fmt::format("{} expects input [batch, {}], got {}", layer, features,
                           shapeStr(input.shape())));
}

Tensor uniformTensor(const Shape& shape, double bound, Rng& rng, Device device) {
  std::vector<float> values(shapeNumel(shape));
  for (float& v : values) v = static_cast<float>(rng.uniform(-bound, bound));
  return Tensor::fromVector(values, shape, device);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Linear

Linear::Linear(int64_t in_features, int64_t out_features, uint64_t seed, Device device) {
  RM_CHECK_ARG(in_features > 0 && out_features > 0,
               fmt::format("Linear({}, {}) needs positive sizes", in_features, out_features));
  // kaiming_uniform_(a = sqrt(5)) gives bound = sqrt(6 / ((1 + a^2) fan_in)) = 1 / sqrt(fan_in);
  // nn.Linear draws the bias from the same bound.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  Rng rng(seed);
  weight_ = makeParameter(uniformTensor({out_features, in_features}, bound, rng, device));
  bias_ = makeParameter(uniformTensor({out_features}, bound, rng, device));
}

// Under autocast (computeDType() BF16 / F16) the product takes the 16-bit input and weight, the
// output is rounded through the format, and the 16-bit input is what is kept (nn/autocast.h).
Tensor Linear::forward(const Tensor& input) {
  checkRows(input, weight_.value.dim(1), "Linear");
  const DType compute = compute_dtype_;
  input_ = autocastOperand(input, compute);
  Tensor out = Tensor::empty({input.dim(0), weight_.value.dim(0)}, DType::kF32, input.device());
  ops::matmul(input_, false, autocastOperand(weight_.value, compute), true, out);
  ops::addBiasRows(out, autocastBias(bias_.value, compute));
  roundOutput(out, compute);
  return out;
}

Tensor Linear::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(input_.defined(), "Linear::backward before forward");
  const DType compute = compute_dtype_;
  const Tensor dy = autocastOperand(grad_output, compute);
  accumulateWeightGrad(dy, true, input_, false, weight_.grad, compute);  // dW += dy^T x
  accumulateBiasGrad(widened(dy), bias_.grad, compute);                  // db += sum dy
  if (!input_gradient_needed_) return Tensor();
  Tensor grad_input = Tensor::empty(input_.shape(), DType::kF32, input_.device());
  autocastMatmul(dy, false, autocastOperand(weight_.value, compute), false, grad_input,
                 compute);  // dx = dy W
  return grad_input;
}

Tensor Linear::backwardInput(const Tensor& grad_output) {
  RM_CHECK_ARG(input_.defined(), "Linear::backwardInput before forward");
  const DType compute = compute_dtype_;
  grad_output_ = autocastOperand(grad_output, compute);
  if (!input_gradient_needed_) return Tensor();
  Tensor grad_input = Tensor::empty(input_.shape(), DType::kF32, input_.device());
  autocastMatmul(grad_output_, false, autocastOperand(weight_.value, compute), false, grad_input,
                 compute);  // dx = dy W
  return grad_input;
}

void Linear::backwardWeights() {
  RM_CHECK_ARG(grad_output_.defined(), "Linear::backwardWeights before backwardInput");
  const DType compute = compute_dtype_;
  accumulateWeightGrad(grad_output_, true, input_, false, weight_.grad, compute);  // dW += dy^T x
  accumulateBiasGrad(widened(grad_output_), bias_.grad, compute);                  // db += sum dy
  grad_output_ = Tensor();
}

void Linear::restoreContext(const std::vector<Tensor>& context) {
  input_ = context.at(0);
  grad_output_ = context.at(1);
}

void Linear::collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + "weight", &weight_});
  out.push_back({prefix + "bias", &bias_});
}

// ---------------------------------------------------------------------------------------------
// Activations

Tensor ReLU::forward(const Tensor& input) {
  input_ = input;
  Tensor out = Tensor::empty(input.shape(), DType::kF32, input.device());
  ops::relu(input, out);
  return out;
}

Tensor ReLU::backward(const Tensor& grad_output) {
  Tensor grad_input = Tensor::empty(input_.shape(), DType::kF32, input_.device());
  ops::reluBackward(input_, grad_output, grad_input);
  return grad_input;
}

Tensor GELU::forward(const Tensor& input) {
  input_ = input;
  Tensor out = Tensor::empty(input.shape(), DType::kF32, input.device());
  ops::gelu(input, out);
  return out;
}

Tensor GELU::backward(const Tensor& grad_output) {
  Tensor grad_input = Tensor::empty(input_.shape(), DType::kF32, input_.device());
  ops::geluBackward(input_, grad_output, grad_input);
  return grad_input;
}

// ---------------------------------------------------------------------------------------------
// Dropout

Dropout::Dropout(float p, uint64_t seed) : p_(p), seed_(seed) {
  RM_CHECK_ARG(p >= 0.0f && p < 1.0f, fmt::format("dropout probability {} outside [0, 1)", p));
}

Tensor Dropout::forward(const Tensor& input) {
  if (!training_ || p_ == 0.0f) {
    mask_ = Tensor();
    return input;
  }
  mask_ = Tensor::empty(input.shape(), DType::kF32, input.device());
  Tensor out = Tensor::empty(input.shape(), DType::kF32, input.device());
  ops::dropout(input, out, mask_, p_, mix64(seed_ ^ mix64(calls_++)), 0);
  return out;
}

Tensor Dropout::backward(const Tensor& grad_output) {
  if (!mask_.defined()) return grad_output;
  Tensor grad_input = Tensor::empty(grad_output.shape(), DType::kF32, grad_output.device());
  ops::mul(grad_output, mask_, grad_input);
  return grad_input;
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

LayerNorm::LayerNorm(int64_t features, float eps, Device device) : eps_(eps) {
  RM_CHECK_ARG(features > 0, fmt::format("LayerNorm({}) needs a positive size", features));
  weight_ = makeParameter(Tensor::full({features}, 1.0f, device));
  bias_ = makeParameter(Tensor::zeros({features}, DType::kF32, device));
}

Tensor LayerNorm::forward(const Tensor& input) {
  checkRows(input, weight_.value.numel(), "LayerNorm");
  input_ = input;
  mean_ = Tensor::empty({input.dim(0)}, DType::kF32, input.device());
  rstd_ = Tensor::empty({input.dim(0)}, DType::kF32, input.device());
  Tensor out = Tensor::empty(input.shape(), DType::kF32, input.device());
  ops::layerNormForward(input, weight_.value, bias_.value, out, mean_, rstd_, eps_);
  return out;
}

Tensor LayerNorm::backward(const Tensor& grad_output) {
  Tensor grad_input = Tensor::empty(input_.shape(), DType::kF32, input_.device());
  ops::layerNormBackward(input_, weight_.value, mean_, rstd_, grad_output, grad_input, weight_.grad,
                         bias_.grad);
  return grad_input;
}

void LayerNorm::restoreContext(const std::vector<Tensor>& context) {
  input_ = context.at(0);
  mean_ = context.at(1);
  rstd_ = context.at(2);
}

void LayerNorm::collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + "weight", &weight_});
  out.push_back({prefix + "bias", &bias_});
}

// ---------------------------------------------------------------------------------------------
// Sequential

void Sequential::append(std::unique_ptr<Module> module) {
  append(std::move(module), std::to_string(children_.size()));
}

void Sequential::append(std::unique_ptr<Module> module, const std::string& name) {
  module->setTraining(training_);
  children_.push_back(std::move(module));
  prefixes_.push_back(name.empty() ? std::string() : name + ".");
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (size_t m = 0; m < children_.size(); ++m) x = forwardChild(m, x);
  return x;
}

Tensor Sequential::backward(const Tensor& grad_output) {
  Tensor g = grad_output;
  for (size_t m = children_.size(); m-- > 0;) g = backwardChild(m, g);
  return g;
}

void Sequential::forEachChild(const std::function<void(Module&)>& visit) {
  for (auto& child : children_) visit(*child);
}

void Sequential::collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  for (size_t i = 0; i < children_.size(); ++i) {
    children_[i]->collectParameters(prefix + prefixes_[i], out);
  }
}

void Sequential::setInputGradientNeeded(bool needed) {
  if (!children_.empty()) children_.front()->setInputGradientNeeded(needed);
}

void Sequential::setTraining(bool training) {
  training_ = training;
  for (auto& child : children_) child->setTraining(training);
}

void Sequential::setBlocks(std::vector<ModelBlock> blocks) {
  size_t next = 0;
  for (const ModelBlock& block : blocks) {
    RM_ENFORCE(block.first_child == next && block.end_child > block.first_child,
               fmt::format("block {} covers children [{}, {}), expected it to start at {}",
                           block.name, block.first_child, block.end_child, next));
    next = block.end_child;
  }
  RM_ENFORCE(next == children_.size(),
             fmt::format("the blocks cover {} of {} children", next, children_.size()));
  blocks_ = std::move(blocks);
  block_of_child_.assign(children_.size(), 0);
  for (size_t b = 0; b < blocks_.size(); ++b)
    for (size_t m = blocks_[b].first_child; m < blocks_[b].end_child; ++m) block_of_child_[m] = b;
  checkpoints_.assign(blocks_.size(), {});
}

// ---------------------------------------------------------------------------------------------
// Residual

Residual::Residual(std::unique_ptr<Sequential> branch) : branch_(std::move(branch)) {
  branch_->setTraining(training_);
}

// The branch's output may alias a tensor its modules keep, so the sum goes into a copy.
Tensor Residual::forward(const Tensor& input) {
  Tensor y = branch_->forward(input).clone();
  ops::axpy(1.0f, input, y);
  return y;
}

Tensor Residual::backward(const Tensor& grad_output) {
  Tensor dx = branch_->backward(grad_output).clone();
  ops::axpy(1.0f, grad_output, dx);
  return dx;
}

std::vector<Tensor> Residual::saveContext() const {
  std::vector<Tensor> context;
  for (size_t i = 0; i < branch_->size(); ++i) {
    for (Tensor& t : branch_->child(i).saveContext()) context.push_back(std::move(t));
  }
  return context;
}

void Residual::restoreContext(const std::vector<Tensor>& context) {
  size_t at = 0;
  for (size_t i = 0; i < branch_->size(); ++i) {
    Module& child = branch_->child(i);
    const size_t n = child.saveContext().size();  // fixed per module type
    RM_ENFORCE(at + n <= context.size(), "Residual: a context shorter than the branch's");
    child.restoreContext(std::vector<Tensor>(context.begin() + at, context.begin() + at + n));
    at += n;
  }
}

void Residual::collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  branch_->collectParameters(prefix, out);
}

void Residual::setTraining(bool training) {
  training_ = training;
  branch_->setTraining(training);
}

}  // namespace ringmaster
