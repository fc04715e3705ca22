// The dataset interface's index check and the batch gatherer.
#include "data/dataset.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

void Dataset::fill(std::span<const int64_t> indices, void* inputs_out, void* targets_out) const {
  const int64_t n = size();
  for (size_t i = 0; i < indices.size(); ++i) {
    RM_CHECK_ARG(indices[i] >= 0 && indices[i] < n,
                 fmt::format("sample index {} (position {} of the batch) is outside a dataset of "
                             "{} samples",
                             indices[i], i, n));
  }
  if (indices.empty()) return;
  fillSamples(indices, inputs_out, targets_out);
}

Batch makeBatch(const Dataset& dataset, std::span<const int64_t> indices, Device device) {
  const auto n = static_cast<int64_t>(indices.size());
  // [n, per-sample shape...]
  auto batched = [n](const Shape& sample) {
    Shape shape{n};
    shape.insert(shape.end(), sample.begin(), sample.end());
    return shape;
  };
  Batch host{Tensor::empty(batched(dataset.inputShape()), dataset.inputDType()),
             Tensor::empty(batched(dataset.targetShape()), dataset.targetDType())};
  dataset.fill(indices, n > 0 ? host.inputs.raw() : nullptr, n > 0 ? host.targets.raw() : nullptr);
  if (!device.isCuda()) return host;
  return Batch{host.inputs.to(device), host.targets.to(device)};
}

}  // namespace ringmaster
