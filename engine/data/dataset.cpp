// The dataset interface's index check and the batch gatherer.
#include "data/dataset.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

void Dataset::fill(std::span<const int64_t> indices, float* features_out,
                   int32_t* labels_out) const {
  const int64_t n = size();
  for (size_t i = 0; i < indices.size(); ++i) {
    RM_CHECK_ARG(indices[i] >= 0 && indices[i] < n,
                 fmt::format("sample index {} (position {} of the batch) is outside a dataset of "
                             "{} samples",
                             indices[i], i, n));
  }
  if (indices.empty()) return;
  fillChecked(indices, features_out, labels_out);
}

Batch makeBatch(const Dataset& dataset, std::span<const int64_t> indices, Device device) {
  const auto n = static_cast<int64_t>(indices.size());
  Batch host{Tensor::empty({n, dataset.features()}, DType::kF32), Tensor::empty({n}, DType::kI32)};
  dataset.fill(indices, n > 0 ? host.features.data<float>() : nullptr,
               n > 0 ? host.labels.data<int32_t>() : nullptr);
  if (!device.isCuda()) return host;
  return Batch{host.features.to(device), host.labels.to(device)};
}

}  // namespace ringmaster
