// Parameter and module traversal shared by every module.
#include "nn/module.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/ops.h"

namespace ringmaster {

Parameter makeParameter(Tensor value) {
  Parameter p;
  p.grad = Tensor::zeros(value.shape(), value.dtype(), value.device());
  p.value = std::move(value);
  return p;
}

void forEachModule(Module& root, const std::function<void(Module&)>& visit) {
  visit(root);
  root.forEachChild([&](Module& child) { forEachModule(child, visit); });
}

void setAutocast(Module& root, DType dtype) {
  RM_CHECK_ARG(
      dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16,
      fmt::format("autocast to {}: only F32, BF16 and F16 are compute types", dtypeName(dtype)));
  forEachModule(root, [&](Module& module) { module.setComputeDType(dtype); });
}

std::vector<NamedParameter> Module::namedParameters() {
  std::vector<NamedParameter> out;
  collectParameters("", out);
  return out;
}

void Module::zeroGrad() {
  for (auto& named : namedParameters()) ops::fill(named.parameter->grad, 0.0f);
}

int64_t Module::parameterCount() {
  int64_t count = 0;
  for (auto& named : namedParameters()) count += named.parameter->value.numel();
  return count;
}

}  // namespace ringmaster
