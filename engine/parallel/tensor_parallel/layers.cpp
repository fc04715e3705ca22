// Forward and backward of the tensor-parallel layers: the plain modules' math (Conv1D,
// AttentionCore, TokenLayerNorm, the tied logits) on the rank's slices, between the region
// mappings.
#include "parallel/tensor_parallel/layers.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/autocast.h"
#include "nn/embedding.h"
#include "parallel/tensor_parallel/mappings.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

// Into the region: all-gather of the sequence shards, or the whole input as it is.
Tensor enterRegion(const Tensor& x, const TensorParallelGroup& g) {
  return g.sequence_parallel ? GatherFromSequenceParallelRegion::forward(x, *g.comm)
                             : CopyToTensorParallelRegion::forward(x, *g.comm);
}
Tensor enterRegionBackward(const Tensor& grad, const TensorParallelGroup& g) {
  return g.sequence_parallel ? GatherFromSequenceParallelRegion::backward(grad, *g.comm)
                             : CopyToTensorParallelRegion::backward(grad, *g.comm);
}

// Out of the region: the partial sums summed, into sequence shards or whole.
Tensor leaveRegion(const Tensor& x, const TensorParallelGroup& g) {
  return g.sequence_parallel ? ReduceScatterToSequenceParallelRegion::forward(x, *g.comm)
                             : ReduceFromTensorParallelRegion::forward(x, *g.comm);
}
Tensor leaveRegionBackward(const Tensor& grad, const TensorParallelGroup& g) {
  return g.sequence_parallel ? ReduceScatterToSequenceParallelRegion::backward(grad, *g.comm)
                             : ReduceFromTensorParallelRegion::backward(grad, *g.comm);
}

Tensor rowsOf(const Tensor& x) {
  const int64_t features = x.dim(static_cast<int>(x.rank() - 1));
  return x.view({x.numel() / features, features});
}

TensorParallelGroup checked(TensorParallelGroup group) {
  RM_CHECK_ARG(group.comm != nullptr, "a tensor-parallel layer needs its group's communicator");
  return group;
}

constexpr GptInit kZeroInit{0, 0.0};  // the weights are the plain model's slices, set after

}  // namespace

// ---------------------------------------------------------------------------------------------
// ColumnParallelConv1D

ColumnParallelConv1D::ColumnParallelConv1D(int64_t in_features, int64_t local_out_features,
                                           bool bias, TensorParallelGroup group, Device device)
    : group_(checked(group)), conv_(in_features, local_out_features, bias, kZeroInit, device) {}

Tensor ColumnParallelConv1D::forward(const Tensor& input) {
  return conv_.forward(enterRegion(input, group_));
}

Tensor ColumnParallelConv1D::backward(const Tensor& grad_output) {
  return enterRegionBackward(conv_.backward(grad_output), group_);
}

// ---------------------------------------------------------------------------------------------
// RowParallelConv1D

RowParallelConv1D::RowParallelConv1D(int64_t local_in_features, int64_t out_features, bool bias,
                                     TensorParallelGroup group, Device device)
    : group_(checked(group)), conv_(local_in_features, out_features, false, kZeroInit, device) {
  conv_.setRoundsOutput(false);
  if (bias) bias_ = makeParameter(Tensor::zeros({out_features}, DType::kF32, device));
}

Tensor RowParallelConv1D::forward(const Tensor& input) {
  Tensor y = leaveRegion(conv_.forward(input), group_);
  Tensor rows = rowsOf(y);
  if (bias_.value.defined()) ops::addBiasRows(rows, autocastBias(bias_.value, compute_dtype_));
  roundOutput(rows, compute_dtype_);
  return y;
}

Tensor RowParallelConv1D::backward(const Tensor& grad_output) {
  if (bias_.value.defined())  // the rank's tokens under sequence parallelism, all of them without
    accumulateBiasGrad(widened(autocastOperand(rowsOf(grad_output), compute_dtype_)), bias_.grad,
                       compute_dtype_);
  return conv_.backward(leaveRegionBackward(grad_output, group_));
}

void RowParallelConv1D::collectParameters(const std::string& prefix,
                                          std::vector<NamedParameter>& out) {
  conv_.collectParameters(prefix, out);
  if (bias_.value.defined()) out.push_back({prefix + "bias", &bias_});
}

// ---------------------------------------------------------------------------------------------
// TensorParallelAttention

TensorParallelAttention::TensorParallelAttention(const Options& o, TensorParallelGroup group,
                                                 Device device)
    : c_attn_(o.dim, 3 * o.local_heads * o.head_dim, o.bias, group, device),
      core_(o.local_heads, o.head_dim, o.dropout, o.attention_dropout_seed),
      c_proj_(o.local_heads * o.head_dim, o.dim, o.bias, group, device),
      resid_dropout_(o.dropout, o.residual_dropout_seed) {}

std::vector<Module*> TensorParallelAttention::children() const {
  auto* self = const_cast<TensorParallelAttention*>(this);
  return {&self->c_attn_, &self->core_, &self->c_proj_, &self->resid_dropout_};
}

Tensor TensorParallelAttention::forward(const Tensor& input) {
  RM_CHECK_ARG(input.rank() == 3,
               fmt::format("attention expects input [batch, tokens, width], got {}",
                           shapeStr(input.shape())));
  return resid_dropout_.forward(c_proj_.forward(core_.forward(c_attn_.forward(input))));
}

Tensor TensorParallelAttention::backward(const Tensor& grad_output) {
  return c_attn_.backward(core_.backward(c_proj_.backward(resid_dropout_.backward(grad_output))));
}

void TensorParallelAttention::restoreContext(const std::vector<Tensor>& context) {
  RM_CHECK_ARG(restoreChildContexts(children(), context) == context.size(),
               "tensor-parallel attention: a context of the wrong size");
}

void TensorParallelAttention::collectParameters(const std::string& prefix,
                                                std::vector<NamedParameter>& out) {
  c_attn_.collectParameters(prefix + "c_attn.", out);
  c_proj_.collectParameters(prefix + "c_proj.", out);
}

void TensorParallelAttention::forEachChild(const std::function<void(Module&)>& visit) {
  for (Module* child : children()) visit(*child);
}

void TensorParallelAttention::setTraining(bool training) {
  Module::setTraining(training);
  for (Module* child : children()) child->setTraining(training);
}

// ---------------------------------------------------------------------------------------------
// TensorParallelMlp

TensorParallelMlp::TensorParallelMlp(const Options& o, TensorParallelGroup group, Device device)
    : c_fc_(o.dim, o.local_hidden, o.bias, group, device),
      c_proj_(o.local_hidden, o.dim, o.bias, group, device),
      dropout_(o.dropout, o.dropout_seed) {}

std::vector<Module*> TensorParallelMlp::children() const {
  auto* self = const_cast<TensorParallelMlp*>(this);
  return {&self->c_fc_, &self->c_proj_, &self->dropout_};
}

// As GptMlp: under autocast the GELU's input is kept 16-bit (c_fc's output holds 16-bit values).
Tensor TensorParallelMlp::forward(const Tensor& input) {
  const Tensor hidden = c_fc_.forward(input);
  Tensor activated = Tensor::empty(hidden.shape(), DType::kF32, input.device());
  ops::geluTanh(hidden, activated);
  gelu_input_ = autocastOperand(hidden, compute_dtype_);
  return dropout_.forward(c_proj_.forward(activated));
}

Tensor TensorParallelMlp::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(gelu_input_.defined(), "MLP backward before forward");
  const Tensor dactivated = c_proj_.backward(dropout_.backward(grad_output));
  Tensor dgelu = Tensor::empty(gelu_input_.shape(), DType::kF32, gelu_input_.device());
  ops::geluTanhBackward(widened(gelu_input_), dactivated, dgelu);
  return c_fc_.backward(dgelu);
}

std::vector<Tensor> TensorParallelMlp::saveContext() const {
  std::vector<Tensor> context = childContexts(children());
  context.push_back(gelu_input_);
  return context;
}

void TensorParallelMlp::restoreContext(const std::vector<Tensor>& context) {
  const size_t at = restoreChildContexts(children(), context);
  RM_CHECK_ARG(context.size() == at + 1, "tensor-parallel MLP: a context of the wrong size");
  gelu_input_ = context[at];
}

void TensorParallelMlp::collectParameters(const std::string& prefix,
                                          std::vector<NamedParameter>& out) {
  c_fc_.collectParameters(prefix + "c_fc.", out);
  c_proj_.collectParameters(prefix + "c_proj.", out);
}

void TensorParallelMlp::forEachChild(const std::function<void(Module&)>& visit) {
  for (Module* child : children()) visit(*child);
}

void TensorParallelMlp::setTraining(bool training) {
  Module::setTraining(training);
  for (Module* child : children()) child->setTraining(training);
}

// ---------------------------------------------------------------------------------------------
// VocabParallelEmbedding

VocabParallelEmbedding::VocabParallelEmbedding(const Options& o, TensorParallelGroup group,
                                               Device device)
    : group_(checked(group)), vocab_start_(o.vocab_start), dropout_(o.dropout, o.dropout_seed) {
  RM_CHECK_ARG(o.local_vocab > 0 && o.context > 0 && o.dim > 0,
               fmt::format("VocabParallelEmbedding({}, {}, {}) needs positive sizes", o.local_vocab,
                           o.context, o.dim));
  wte_ = makeParameter(Tensor::zeros({o.local_vocab, o.dim}, DType::kF32, device));
  wpe_ = makeParameter(Tensor::zeros({o.context, o.dim}, DType::kF32, device));
}

Tensor VocabParallelEmbedding::positionRows(Tensor& table, int64_t tokens) const {
  if (!group_.sequence_parallel) return table;  // addPositionRows reads the first rows
  return table.narrowRows(group_.comm->rank() * tokens, tokens);
}

Tensor VocabParallelEmbedding::forward(const Tensor& input) {
  const int64_t local_vocab = wte_.value.dim(0), dim = wte_.value.dim(1);
  RM_CHECK_ARG(input.dtype() == DType::kI32 && input.rank() == 2,
               fmt::format("the GPT expects token ids [batch, tokens] int32, got {}",
                           shapeStr(input.shape())));
  RM_CHECK_ARG(input.dim(1) <= wpe_.value.dim(0),
               fmt::format("a sample of {} tokens is longer than model.context ({})", input.dim(1),
                           wpe_.value.dim(0)));
  // The rank's rows, and a zero row (index local_vocab) that every id outside them looks up.
  std::vector<int32_t> ids(static_cast<size_t>(input.numel()));
  Tensor host_ids = input.to(Device::cpu());
  std::copy_n(host_ids.data<int32_t>(), ids.size(), ids.begin());
  const int64_t vocab = local_vocab * group_.comm->size();
  for (int32_t& id : ids) {
    RM_CHECK_ARG(id >= 0 && id < vocab,
                 fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab));
    const int64_t local = id - vocab_start_;
    id = static_cast<int32_t>(local >= 0 && local < local_vocab ? local : local_vocab);
  }
  local_ids_ = Tensor::fromInts(ids, input.shape(), input.device());
  Tensor table = Tensor::zeros({local_vocab + 1, dim}, DType::kF32, input.device());
  table.narrowRows(0, local_vocab).copyFrom(wte_.value);
  Tensor looked_up = Tensor::empty({input.dim(0), input.dim(1), dim}, DType::kF32, input.device());
  ops::embeddingForward(local_ids_, table, looked_up);
  Tensor x = leaveRegion(looked_up, group_);
  Tensor positions = positionRows(wpe_.value, x.dim(1));
  ops::addPositionRows(x, positions);
  return dropout_.forward(x);
}

Tensor VocabParallelEmbedding::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(local_ids_.defined(), "Embedding::backward before forward");
  const Tensor dx = dropout_.backward(grad_output);
  Tensor dpositions = positionRows(wpe_.grad, dx.dim(1));
  ops::positionRowsBackward(dx, dpositions);
  const Tensor dlooked_up = leaveRegionBackward(dx, group_);
  const int64_t local_vocab = wte_.value.dim(0);
  Tensor dtable = Tensor::zeros({local_vocab + 1, wte_.value.dim(1)}, DType::kF32, dx.device());
  ops::embeddingBackward(local_ids_, dlooked_up, dtable);
  ops::axpy(1.0f, dtable.narrowRows(0, local_vocab), wte_.grad);
  return Tensor();
}

std::vector<Tensor> VocabParallelEmbedding::saveContext() const {
  return {local_ids_, dropout_.saveContext().at(0)};
}

void VocabParallelEmbedding::restoreContext(const std::vector<Tensor>& context) {
  local_ids_ = context.at(0);
  dropout_.restoreContext({context.at(1)});
}

void VocabParallelEmbedding::collectParameters(const std::string& prefix,
                                               std::vector<NamedParameter>& out) {
  out.push_back({prefix + "wte.weight", &wte_});
  out.push_back({prefix + "wpe.weight", &wpe_});
}

void VocabParallelEmbedding::setTraining(bool training) {
  Module::setTraining(training);
  dropout_.setTraining(training);
}

// ---------------------------------------------------------------------------------------------
// VocabParallelLmHead

VocabParallelLmHead::VocabParallelLmHead(int64_t dim, bool bias, Parameter* tied,
                                         TensorParallelGroup group, Device device)
    : group_(checked(group)), ln_f_(dim, bias, device), tied_(tied) {
  RM_CHECK_ARG(tied != nullptr && tied->value.rank() == 2 && tied->value.dim(1) == dim,
               fmt::format("the LM head needs the token embedding [vocab, {}] to tie to", dim));
}

Tensor VocabParallelLmHead::forward(const Tensor& input) {
  normed_ = autocastOperand(enterRegion(ln_f_.forward(input), group_), compute_dtype_);
  return tiedLogitsForward(normed_, tied_->value, compute_dtype_);
}

Tensor VocabParallelLmHead::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(normed_.defined(), "LmHead::backward before forward");
  const Tensor dnormed = tiedLogitsBackward(normed_, grad_output, *tied_, compute_dtype_);
  return ln_f_.backward(enterRegionBackward(dnormed, group_));
}

std::vector<Tensor> VocabParallelLmHead::saveContext() const {
  std::vector<Tensor> context = ln_f_.saveContext();
  context.push_back(normed_);
  return context;
}

void VocabParallelLmHead::restoreContext(const std::vector<Tensor>& context) {
  RM_CHECK_ARG(context.size() == 4, "LmHead: a context of the wrong size");
  ln_f_.restoreContext({context[0], context[1], context[2]});
  normed_ = context[3];
}

void VocabParallelLmHead::collectParameters(const std::string& prefix,
                                            std::vector<NamedParameter>& out) {
  ln_f_.collectParameters(prefix + "ln_f.", out);
}

void VocabParallelLmHead::setTraining(bool training) {
  Module::setTraining(training);
  ln_f_.setTraining(training);
}

}  // namespace ringmaster
