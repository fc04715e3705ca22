// Forward and backward of the GPT's token and position embedding and its tied LM head.
#include "nn/embedding.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "nn/autocast.h"
#include "tensor/ops.h"

namespace ringmaster {

// ---------------------------------------------------------------------------------------------
// GptEmbedding

GptEmbedding::GptEmbedding(const Options& o, Device device) : dropout_(o.dropout, o.dropout_seed) {
  RM_CHECK_ARG(
      o.vocab > 0 && o.context > 0 && o.dim > 0,
      fmt::format("Embedding({}, {}, {}) needs positive sizes", o.vocab, o.context, o.dim));
  wte_ = makeParameter(normalTensor({o.vocab, o.dim}, o.token_init.std, o.token_init.seed, device));
  wpe_ = makeParameter(
      normalTensor({o.context, o.dim}, o.position_init.std, o.position_init.seed, device));
}

Tensor GptEmbedding::forward(const Tensor& input) {
  const int64_t context = wpe_.value.dim(0), dim = wpe_.value.dim(1);
  RM_CHECK_ARG(input.dtype() == DType::kI32 && input.rank() == 2,
               fmt::format("the GPT expects token ids [batch, tokens] int32, got {}",
                           shapeStr(input.shape())));
  RM_CHECK_ARG(input.dim(1) <= context,
               fmt::format("a sample of {} tokens is longer than model.context ({})", input.dim(1),
                           context));
  ids_ = input;
  Tensor x = Tensor::empty({input.dim(0), input.dim(1), dim}, DType::kF32, input.device());
  ops::embeddingForward(input, wte_.value, x);
  ops::addPositionRows(x, wpe_.value);
  return dropout_.forward(x);
}

Tensor GptEmbedding::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(ids_.defined(), "Embedding::backward before forward");
  const Tensor dx = dropout_.backward(grad_output);
  ops::embeddingBackward(ids_, dx, wte_.grad);
  ops::positionRowsBackward(dx, wpe_.grad);
  return Tensor();
}

std::vector<Tensor> GptEmbedding::saveContext() const {
  return {ids_, dropout_.saveContext().at(0)};
}

void GptEmbedding::restoreContext(const std::vector<Tensor>& context) {
  ids_ = context.at(0);
  dropout_.restoreContext({context.at(1)});
}

void GptEmbedding::collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  out.push_back({prefix + "wte.weight", &wte_});
  out.push_back({prefix + "wpe.weight", &wpe_});
}

void GptEmbedding::forEachChild(const std::function<void(Module&)>& visit) {
  visit(dropout_);
}

void GptEmbedding::setTraining(bool training) {
  Module::setTraining(training);
  dropout_.setTraining(training);
}

// ---------------------------------------------------------------------------------------------
// LmHead

LmHead::LmHead(int64_t dim, bool bias, Parameter* tied, Device device)
    : ln_f_(dim, bias, device), tied_(tied) {
  RM_CHECK_ARG(tied != nullptr && tied->value.rank() == 2 && tied->value.dim(1) == dim,
               fmt::format("the LM head needs the token embedding [vocab, {}] to tie to", dim));
}

// Under autocast the product takes the 16-bit ln_f output and the 16-bit wte, and the logits are
// rounded through the format (nn/autocast.h).
Tensor tiedLogitsForward(const Tensor& normed, const Tensor& wte, DType compute) {
  const int64_t V = wte.dim(0), C = wte.dim(1);
  const Tensor x = normed.view({normed.numel() / C, C});
  Tensor logits = Tensor::empty({x.dim(0), V}, DType::kF32, normed.device());
  autocastMatmul(x, false, autocastOperand(wte, compute), true, logits, compute);  // x wte^T
  Shape shape = normed.shape();
  shape.back() = V;
  return logits.view(shape);
}

Tensor tiedLogitsBackward(const Tensor& normed, const Tensor& grad_logits, Parameter& wte,
                          DType compute) {
  const int64_t V = wte.value.dim(0), C = wte.value.dim(1);
  const Tensor x = normed.view({normed.numel() / C, C});
  const Tensor dlogits = autocastOperand(grad_logits.view({x.dim(0), V}), compute);
  accumulateWeightGrad(dlogits, true, x, false, wte.grad, compute);  // dwte += dlogits^T x
  Tensor dx = Tensor::empty(x.shape(), DType::kF32, x.device());
  autocastMatmul(dlogits, false, autocastOperand(wte.value, compute), false, dx,
                 compute);  // dx = dlogits wte
  return dx.view(normed.shape());
}

// ln_f stays fp32; its output is kept 16-bit under autocast as the product's operand.
Tensor LmHead::forward(const Tensor& input) {
  normed_ = autocastOperand(ln_f_.forward(input), compute_dtype_);
  return tiedLogitsForward(normed_, tied_->value, compute_dtype_);
}

Tensor LmHead::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(normed_.defined(), "LmHead::backward before forward");
  return ln_f_.backward(tiedLogitsBackward(normed_, grad_output, *tied_, compute_dtype_));
}

std::vector<Tensor> LmHead::saveContext() const {
  std::vector<Tensor> context = ln_f_.saveContext();
  context.push_back(normed_);
  return context;
}

void LmHead::restoreContext(const std::vector<Tensor>& context) {
  RM_CHECK_ARG(context.size() == 4, "LmHead: a context of the wrong size");
  ln_f_.restoreContext({context[0], context[1], context[2]});
  normed_ = context[3];
}

void LmHead::collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  ln_f_.collectParameters(prefix + "ln_f.", out);
}

void LmHead::forEachChild(const std::function<void(Module&)>& visit) {
  visit(ln_f_);
}

void LmHead::setTraining(bool training) {
  Module::setTraining(training);
  ln_f_.setTraining(training);
}

}  // namespace ringmaster
