// Forward and backward of the GPT's Conv1D, token LayerNorm and causal self-attention, through
// the ops:: layer so that they run on whichever device their tensors live.
#include "nn/attention.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "nn/autocast.h"
#include "tensor/ops.h"

namespace ringmaster {

std::vector<Tensor> childContexts(const std::vector<Module*>& children) {
  std::vector<Tensor> out;
  for (const Module* child : children) {
    std::vector<Tensor> context = child->saveContext();
    out.insert(out.end(), context.begin(), context.end());
  }
  return out;
}

size_t restoreChildContexts(const std::vector<Module*>& children,
                            const std::vector<Tensor>& context, size_t offset) {
  for (Module* child : children) {
    const size_t count = child->saveContext().size();
    RM_CHECK_ARG(offset + count <= context.size(),
                 fmt::format("a context of {} tensors is too short for {}", context.size(),
                             child->typeName()));
    child->restoreContext(
        std::vector<Tensor>(context.begin() + static_cast<ptrdiff_t>(offset),
                            context.begin() + static_cast<ptrdiff_t>(offset + count)));
    offset += count;
  }
  return offset;
}

Tensor normalTensor(const Shape& shape, double std, uint64_t seed, Device device) {
  std::vector<float> values(shapeNumel(shape));
  Rng rng(seed);
  for (float& v : values) v = static_cast<float>(std * rng.normal());
  return Tensor::fromVector(values, shape, device);
}

namespace {

// x [..., features] as rows [N, features].
Tensor rows(const Tensor& x, int64_t features, const char* layer) {
  RM_CHECK_ARG(
      x.rank() >= 1 && x.dim(static_cast<int>(x.rank() - 1)) == features,
      fmt::format("{} expects input [..., {}], got {}", layer, features, shapeStr(x.shape())));
  return x.view({x.numel() / features, features});
}

Shape withLast(Shape shape, int64_t last) {
  shape.back() = last;
  return shape;
}

// y = op(a) op(b) of the attention, where a (causal_a) or y is a [T, T] causal matrix: in fp32
// the masked blocks are skipped (ops::matmulBatchedCausal, the same sums to rounding; y above its
// diagonal left unspecified, which only the causal softmax and the dropout read, and neither uses);
// under autocast the full product of autocastMatmulBatched.
void causalProduct(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& y,
                   bool causal_a, DType compute) {
  if (isLowPrecision(compute))
    autocastMatmulBatched(a, trans_a, b, trans_b, y, compute);
  else
    ops::matmulBatchedCausal(a, trans_a, b, trans_b, y, causal_a);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Conv1D

Conv1D::Conv1D(int64_t in_features, int64_t out_features, bool bias, GptInit init, Device device) {
  RM_CHECK_ARG(in_features > 0 && out_features > 0,
               fmt::format("Conv1D({}, {}) needs positive sizes", in_features, out_features));
  weight_ = makeParameter(normalTensor({in_features, out_features}, init.std, init.seed, device));
  if (bias) bias_ = makeParameter(Tensor::zeros({out_features}, DType::kF32, device));
}

// Under autocast the product takes the 16-bit input and weight (the 16-bit input is kept), the
// output is rounded through the format, and the weight's gradient is rounded before it is added
// (nn/autocast.h).
Tensor Conv1D::forward(const Tensor& input) {
  const int64_t in = weight_.value.dim(0), out = weight_.value.dim(1);
  const DType compute = compute_dtype_;
  input_ = autocastOperand(input, compute);
  const Tensor x = rows(input_, in, "Conv1D");
  Tensor y = Tensor::empty({x.dim(0), out}, DType::kF32, input.device());
  ops::matmul(x, false, autocastOperand(weight_.value, compute), false, y);  // y = x W
  if (bias_.value.defined()) ops::addBiasRows(y, autocastBias(bias_.value, compute));
  if (rounds_output_) roundOutput(y, compute);
  return y.view(withLast(input.shape(), out));
}

Tensor Conv1D::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(input_.defined(), "Conv1D::backward before forward");
  const int64_t in = weight_.value.dim(0), out = weight_.value.dim(1);
  const DType compute = compute_dtype_;
  const Tensor x = rows(input_, in, "Conv1D");
  const Tensor dy = autocastOperand(rows(grad_output, out, "Conv1D backward"), compute);
  accumulateWeightGrad(x, true, dy, false, weight_.grad, compute);  // dW += x^T dy
  if (bias_.value.defined()) accumulateBiasGrad(widened(dy), bias_.grad, compute);
  Tensor dx = Tensor::empty({x.dim(0), in}, DType::kF32, input_.device());
  autocastMatmul(dy, false, autocastOperand(weight_.value, compute), true, dx,
                 compute);  // dx = dy W^T
  return dx.view(input_.shape());
}

void Conv1D::collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + "weight", &weight_});
  if (bias_.value.defined()) out.push_back({prefix + "bias", &bias_});
}

// ---------------------------------------------------------------------------------------------
// TokenLayerNorm

TokenLayerNorm::TokenLayerNorm(int64_t features, bool bias, Device device) : has_bias_(bias) {
  RM_CHECK_ARG(features > 0, fmt::format("LayerNorm({}) needs a positive size", features));
  weight_ = makeParameter(Tensor::full({features}, 1.0f, device));
  bias_ = makeParameter(Tensor::zeros({features}, DType::kF32, device));
}

Tensor TokenLayerNorm::forward(const Tensor& input) {
  const int64_t features = weight_.value.numel();
  const Tensor x = rows(input, features, "LayerNorm");
  input_ = input;
  mean_ = Tensor::empty({x.dim(0)}, DType::kF32, input.device());
  rstd_ = Tensor::empty({x.dim(0)}, DType::kF32, input.device());
  Tensor y = Tensor::empty(x.shape(), DType::kF32, input.device());
  ops::layerNormForward(x, weight_.value, bias_.value, y, mean_, rstd_, 1e-5f);
  return y.view(input.shape());
}

Tensor TokenLayerNorm::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(input_.defined(), "LayerNorm::backward before forward");
  const int64_t features = weight_.value.numel();
  const Tensor x = rows(input_, features, "LayerNorm");
  Tensor dx = Tensor::empty(x.shape(), DType::kF32, input_.device());
  ops::layerNormBackward(x, weight_.value, mean_, rstd_, rows(grad_output, features, "LayerNorm"),
                         dx, weight_.grad, bias_.grad);
  if (!has_bias_) ops::fill(bias_.grad, 0.0f);  // the constant zero bias learns nothing
  return dx.view(input_.shape());
}

void TokenLayerNorm::restoreContext(const std::vector<Tensor>& context) {
  input_ = context.at(0);
  mean_ = context.at(1);
  rstd_ = context.at(2);
}

void TokenLayerNorm::collectParameters(const std::string& prefix,
                                       std::vector<NamedParameter>& out) {
  out.push_back({prefix + "weight", &weight_});
  if (has_bias_) out.push_back({prefix + "bias", &bias_});
}

// ---------------------------------------------------------------------------------------------
// AttentionCore

AttentionCore::AttentionCore(int64_t heads, int64_t head_dim, float dropout, uint64_t dropout_seed)
    : heads_(heads), head_dim_(head_dim), attn_dropout_(dropout, dropout_seed) {
  RM_CHECK_ARG(
      heads > 0 && head_dim > 0,
      fmt::format("attention needs positive heads and head width, got {} and {}", heads, head_dim));
}

// Under autocast q, k, v and the probabilities are kept 16-bit; the scores are rounded through the
// format before the fp32 softmax, and every product of the backward takes 16-bit operands.
Tensor AttentionCore::forward(const Tensor& qkv) {
  RM_CHECK_ARG(qkv.rank() == 3 && qkv.dim(2) == 3 * heads_ * head_dim_,
               fmt::format("attention expects input [batch, tokens, {}], got {}",
                           3 * heads_ * head_dim_, shapeStr(qkv.shape())));
  const int64_t B = qkv.dim(0), T = qkv.dim(1), H = heads_, D = head_dim_;
  const Device device = qkv.device();
  const DType compute = compute_dtype_;
  Tensor q = Tensor::empty({B, H, T, D}, DType::kF32, device);
  Tensor k = Tensor::empty({B, H, T, D}, DType::kF32, device);
  Tensor v = Tensor::empty({B, H, T, D}, DType::kF32, device);
  ops::splitQkv(qkv, q, k, v);
  q_ = autocastOperand(q, compute);
  k_ = autocastOperand(k, compute);
  v_ = autocastOperand(v, compute);
  Tensor scores = Tensor::empty({B, H, T, T}, DType::kF32, device);
  causalProduct(q_, false, k_, true, scores, false, compute);  // q k^T
  Tensor probs = Tensor::empty({B, H, T, T}, DType::kF32, device);
  ops::causalSoftmaxForward(scores, probs, static_cast<float>(1.0 / std::sqrt(double(D))));
  const Tensor attended = attn_dropout_.forward(probs);
  probs_ = autocastOperand(probs, compute);
  attended_ = attended.sharesStorageWith(probs) ? probs_ : autocastOperand(attended, compute);
  Tensor y = Tensor::empty({B, H, T, D}, DType::kF32, device);
  causalProduct(attended_, false, v_, false, y, true, compute);  // probs v
  Tensor merged = Tensor::empty({B, T, H, D}, DType::kF32, device);
  ops::permute0213(y, merged);
  return merged.view({B, T, H * D});
}

Tensor AttentionCore::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(probs_.defined(), "attention backward before forward");
  const int64_t B = q_.dim(0), H = heads_, T = q_.dim(2), D = head_dim_;
  const Device device = q_.device();
  const DType compute = compute_dtype_;
  Tensor dy_full = Tensor::empty({B, H, T, D}, DType::kF32, device);
  ops::permute0213(grad_output.view({B, T, H, D}), dy_full);
  const Tensor dy = autocastOperand(dy_full, compute);
  Tensor dattended = Tensor::empty({B, H, T, T}, DType::kF32, device);
  causalProduct(dy, false, v_, true, dattended, false, compute);  // dy v^T
  Tensor dv = Tensor::empty({B, H, T, D}, DType::kF32, device);
  causalProduct(attended_, true, dy, false, dv, true, compute);  // probs^T dy
  const Tensor dprobs = attn_dropout_.backward(dattended);
  Tensor dscores_full = Tensor::empty({B, H, T, T}, DType::kF32, device);
  ops::causalSoftmaxBackward(widened(probs_), dprobs, dscores_full,
                             static_cast<float>(1.0 / std::sqrt(double(D))));
  const Tensor dscores = autocastOperand(dscores_full, compute);
  Tensor dq = Tensor::empty({B, H, T, D}, DType::kF32, device);
  causalProduct(dscores, false, k_, false, dq, true, compute);  // dscores k
  Tensor dk = Tensor::empty({B, H, T, D}, DType::kF32, device);
  causalProduct(dscores, true, q_, false, dk, true, compute);  // dscores^T q
  Tensor dqkv = Tensor::empty({B, T, 3 * H * D}, DType::kF32, device);
  ops::mergeQkv(dq, dk, dv, dqkv);
  return dqkv;
}

std::vector<Tensor> AttentionCore::saveContext() const {
  std::vector<Tensor> context = attn_dropout_.saveContext();
  context.insert(context.end(), {q_, k_, v_, probs_, attended_});
  return context;
}

void AttentionCore::restoreContext(const std::vector<Tensor>& context) {
  RM_CHECK_ARG(context.size() == 6, "attention: a context of the wrong size");
  attn_dropout_.restoreContext({context[0]});
  q_ = context[1];
  k_ = context[2];
  v_ = context[3];
  probs_ = context[4];
  attended_ = context[5];
}

void AttentionCore::setTraining(bool training) {
  Module::setTraining(training);
  attn_dropout_.setTraining(training);
}

// ---------------------------------------------------------------------------------------------
// CausalSelfAttention

CausalSelfAttention::CausalSelfAttention(const Options& o, Device device)
    : c_attn_(o.dim, 3 * o.heads * o.head_dim, o.bias, o.init, device),
      core_(o.heads, o.head_dim, o.dropout, o.dropout_seed),
      c_proj_(o.heads * o.head_dim, o.dim, o.bias, o.proj_init, device),
      resid_dropout_(o.dropout, mix64(o.dropout_seed + 1)) {}

std::vector<Module*> CausalSelfAttention::children() const {
  auto* self = const_cast<CausalSelfAttention*>(this);
  return {&self->c_attn_, &self->core_, &self->c_proj_, &self->resid_dropout_};
}

Tensor CausalSelfAttention::forward(const Tensor& input) {
  RM_CHECK_ARG(input.rank() == 3,
               fmt::format("attention expects input [batch, tokens, width], got {}",
                           shapeStr(input.shape())));
  return resid_dropout_.forward(c_proj_.forward(core_.forward(c_attn_.forward(input))));
}

Tensor CausalSelfAttention::backward(const Tensor& grad_output) {
  return c_attn_.backward(core_.backward(c_proj_.backward(resid_dropout_.backward(grad_output))));
}

void CausalSelfAttention::restoreContext(const std::vector<Tensor>& context) {
  RM_CHECK_ARG(restoreChildContexts(children(), context) == context.size(),
               "attention: a context of the wrong size");
}

void CausalSelfAttention::collectParameters(const std::string& prefix,
                                            std::vector<NamedParameter>& out) {
  c_attn_.collectParameters(prefix + "c_attn.", out);
  c_proj_.collectParameters(prefix + "c_proj.", out);
}

void CausalSelfAttention::forEachChild(const std::function<void(Module&)>& visit) {
  for (Module* child : children()) visit(*child);
}

void CausalSelfAttention::setTraining(bool training) {
  Module::setTraining(training);
  for (Module* child : children()) child->setTraining(training);
}

}  // namespace ringmaster
