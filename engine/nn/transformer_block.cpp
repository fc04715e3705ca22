// Forward and backward of the GPT's MLP and transformer block.
#include "nn/transformer_block.h"

#include "core/error.h"
#include "core/random.h"
#include "nn/autocast.h"
#include "tensor/ops.h"

namespace ringmaster {

namespace {

// a + b, written into b when b is the sole handle on its storage (a sublayer's fresh output or
// gradient), else into a new tensor.
Tensor added(const Tensor& a, Tensor b) {
  Tensor out = b.isSoleHandle() ? std::move(b) : b.clone();
  ops::axpy(1.0f, a, out);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// GptMlp

GptMlp::GptMlp(const Options& o, Device device)
    : c_fc_(o.dim, o.hidden, o.bias, o.init, device),
      c_proj_(o.hidden, o.dim, o.bias, o.proj_init, device),
      dropout_(o.dropout, o.dropout_seed) {}

std::vector<Module*> GptMlp::children() const {
  auto* self = const_cast<GptMlp*>(this);
  return {&self->c_fc_, &self->c_proj_, &self->dropout_};
}

// Under autocast the GELU's input is kept 16-bit: lossless, c_fc's output holds 16-bit values.
Tensor GptMlp::forward(const Tensor& input) {
  const Tensor hidden = c_fc_.forward(input);
  Tensor activated = Tensor::empty(hidden.shape(), DType::kF32, input.device());
  ops::geluTanh(hidden, activated);
  gelu_input_ = autocastOperand(hidden, compute_dtype_);
  return dropout_.forward(c_proj_.forward(activated));
}

Tensor GptMlp::backward(const Tensor& grad_output) {
  RM_CHECK_ARG(gelu_input_.defined(), "MLP backward before forward");
  const Tensor dactivated = c_proj_.backward(dropout_.backward(grad_output));
  Tensor dgelu = Tensor::empty(gelu_input_.shape(), DType::kF32, gelu_input_.device());
  ops::geluTanhBackward(widened(gelu_input_), dactivated, dgelu);
  return c_fc_.backward(dgelu);
}

std::vector<Tensor> GptMlp::saveContext() const {
  std::vector<Tensor> context = childContexts(children());
  context.push_back(gelu_input_);
  return context;
}

void GptMlp::restoreContext(const std::vector<Tensor>& context) {
  const size_t at = restoreChildContexts(children(), context);
  RM_CHECK_ARG(context.size() == at + 1, "MLP: a context of the wrong size");
  gelu_input_ = context[at];
}

void GptMlp::collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {
  c_fc_.collectParameters(prefix + "c_fc.", out);
  c_proj_.collectParameters(prefix + "c_proj.", out);
}

void GptMlp::forEachChild(const std::function<void(Module&)>& visit) {
  for (Module* child : children()) visit(*child);
}

void GptMlp::setTraining(bool training) {
  Module::setTraining(training);
  for (Module* child : children()) child->setTraining(training);
}

// ---------------------------------------------------------------------------------------------
// TransformerBlock

TransformerBlock::TransformerBlock(const TransformerBlockOptions& o, Device device)
    : TransformerBlock(
          o.dim, o.bias,
          std::make_unique<CausalSelfAttention>(
              CausalSelfAttention::Options{.dim = o.dim,
                                           .heads = o.heads,
                                           .head_dim = o.head_dim,
                                           .dropout = o.dropout,
                                           .bias = o.bias,
                                           .init = o.init,
                                           .proj_init = o.proj_init,
                                           .dropout_seed = o.dropout_seed},
              device),
          std::make_unique<GptMlp>(
              GptMlp::Options{.dim = o.dim,
                              .hidden = o.hidden,
                              .dropout = o.dropout,
                              .bias = o.bias,
                              .init = {mix64(o.init.seed + 1), o.init.std},
                              .proj_init = {mix64(o.proj_init.seed + 1), o.proj_init.std},
                              .dropout_seed = mix64(o.dropout_seed + 2)},
              device),
          device) {}

TransformerBlock::TransformerBlock(int64_t dim, bool bias, std::unique_ptr<Module> attention,
                                   std::unique_ptr<Module> mlp, Device device)
    : ln_1_(dim, bias, device),
      attn_(std::move(attention)),
      ln_2_(dim, bias, device),
      mlp_(std::move(mlp)) {
  RM_CHECK_ARG(attn_ && mlp_, "a transformer block needs an attention and an MLP");
}

std::vector<Module*> TransformerBlock::children() const {
  auto* self = const_cast<TransformerBlock*>(this);
  return {&self->ln_1_, attn_.get(), &self->ln_2_, mlp_.get()};
}

Tensor TransformerBlock::forward(const Tensor& input) {
  const Tensor h = added(input, attn_->forward(ln_1_.forward(input)));
  return added(h, mlp_->forward(ln_2_.forward(h)));
}

Tensor TransformerBlock::backward(const Tensor& grad_output) {
  const Tensor dh = added(grad_output, ln_2_.backward(mlp_->backward(grad_output)));
  return added(dh, ln_1_.backward(attn_->backward(dh)));
}

void TransformerBlock::restoreContext(const std::vector<Tensor>& context) {
  RM_CHECK_ARG(restoreChildContexts(children(), context) == context.size(),
               "transformer block: a context of the wrong size");
}

void TransformerBlock::collectParameters(const std::string& prefix,
                                         std::vector<NamedParameter>& out) {
  ln_1_.collectParameters(prefix + "ln_1.", out);
  attn_->collectParameters(prefix + "attn.", out);
  ln_2_.collectParameters(prefix + "ln_2.", out);
  mlp_->collectParameters(prefix + "mlp.", out);
}

void TransformerBlock::forEachChild(const std::function<void(Module&)>& visit) {
  for (Module* child : children()) visit(*child);
}

void TransformerBlock::setTraining(bool training) {
  Module::setTraining(training);
  for (Module* child : children()) child->setTraining(training);
}

}  // namespace ringmaster
