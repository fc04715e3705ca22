// Modules with explicit forward and backward, in the manner of torch.nn but without autograd: a
// module keeps what its backward needs from the last forward, and backward accumulates parameter
// gradients (like .grad after loss.backward()) and returns the gradient of its input.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ringmaster {

struct Parameter {
  Tensor value;
  Tensor grad;  // same shape and device as value; zeroed by zeroGrad(), accumulated by backward
};

struct NamedParameter {
  std::string name;  // PyTorch state_dict naming: "0.weight", "3.bias", ...
  Parameter* parameter;
};

class Module {
 public:
  virtual ~Module() = default;

  // "Linear", "ReLU", ...: the torch.nn class this module corresponds to.
  virtual std::string typeName() const = 0;
  virtual Tensor forward(const Tensor& input) = 0;
  // Accumulates into the parameters' grads and returns d(loss)/d(input of the last forward).
  virtual Tensor backward(const Tensor& grad_output) = 0;
  // Appends this module's parameters, names prefixed by `prefix` ("" or "3.").
  virtual void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) {}
  // What backward needs from the last forward (after backwardInput: what backwardWeights needs),
  // so that a pipeline can run several micro-batches' forwards before their backwards. The
  // tensors are shared, not copied.
  virtual std::vector<Tensor> saveContext() const { return {}; }
  virtual void restoreContext(const std::vector<Tensor>& context) {}
  // Backward in two halves for zero-bubble pipeline schedules: backwardInput returns d(input) and
  // may leave parameter gradients to backwardWeights. Modules whose weight gradients are cheap do
  // everything in the first half.
  virtual Tensor backwardInput(const Tensor& grad_output) { return backward(grad_output); }
  virtual void backwardWeights() {}
  // Whether backward (and backwardInput) must return d(loss)/d(input): yes by default. Turned off
  // on a model whose input is data needing no gradient (PyTorch skips it for an input without
  // requires_grad): a Linear then leaves out its dx = dy W product and returns an undefined
  // Tensor; its parameter gradients are the same. A Sequential passes it to its first child;
  // modules that cannot skip the work ignore it.
  virtual void setInputGradientNeeded(bool needed) {}
  // Calls `visit` on each module directly inside this one (not recursively). Containers and
  // composite modules override it so that walks over a model (forEachModule) reach every module,
  // e.g. each Dropout whose mask counter activation checkpointing rewinds or a resume restores.
  virtual void forEachChild(const std::function<void(Module&)>& visit) {}
  // Train mode on (the default) or eval mode; containers forward it to their children.
  virtual void setTraining(bool training) { training_ = training; }
  bool training() const { return training_; }

  // torch.autocast for this module's own matrix products (train.precision): DType::kF32 (off),
  // kBF16 or kF16. Their operands are cast to the 16-bit format (and kept so for the backward),
  // the products accumulate in fp32 and their outputs are rounded through the format; LayerNorm,
  // softmax and the loss stay in fp32. Modules without matrix products ignore it; containers and
  // composites are reached by setAutocast() below.
  void setComputeDType(DType dtype) { compute_dtype_ = dtype; }
  DType computeDType() const { return compute_dtype_; }

  std::vector<NamedParameter> namedParameters();
  void zeroGrad();
  int64_t parameterCount();

 protected:
  bool training_ = true;
  DType compute_dtype_ = DType::kF32;
};

// `visit` on `root` and then on every module inside it, depth first, in forward order.
void forEachModule(Module& root, const std::function<void(Module&)>& visit);

// setComputeDType(dtype) on `root` and every module inside it.
void setAutocast(Module& root, DType dtype);

// A parameter with a zeroed gradient of the same shape.
Parameter makeParameter(Tensor value);

}  // namespace ringmaster
