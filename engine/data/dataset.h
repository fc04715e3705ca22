// The dataset interface every trainer reads samples through, and makeBatch, which gathers a batch
// of samples into tensors on a device. A dataset yields (inputs, targets) of the per-sample shapes
// and dtypes it declares; ClassificationDataset is the common case of a float feature vector and an
// int32 class index per sample. Transforms and augmentation are not part of it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "tensor/tensor.h"

namespace ringmaster {

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual int64_t size() const = 0;
  // Per sample: the inputs' and the targets' shapes and dtypes. {features} F32 and {} I32 (a class
  // index) for classification; a token window would be {context} I32 and {context} I32.
  virtual Shape inputShape() const = 0;
  virtual DType inputDType() const { return DType::kF32; }
  virtual Shape targetShape() const { return {}; }
  virtual DType targetDType() const { return DType::kI32; }
  // Classification sets: the number of classes (targets lie in [0, classes)); nullopt otherwise.
  virtual std::optional<int64_t> classCount() const { return std::nullopt; }

  // Writes the samples `indices` names, in that order, row-major: inputs into
  // inputs_out[indices.size() * numel(inputShape())] of inputDType(), targets likewise. An index
  // outside [0, size()) is a kInvalidArgument error. Safe to call from several threads at once.
  void fill(std::span<const int64_t> indices, void* inputs_out, void* targets_out) const;

 private:
  // fill() after its indices were checked.
  virtual void fillSamples(std::span<const int64_t> indices, void* inputs_out,
                           void* targets_out) const = 0;
};

// A float feature vector and an int32 class label per sample.
class ClassificationDataset : public Dataset {
 public:
  // Features per sample, and classes (labels lie in [0, classes)).
  virtual int64_t features() const = 0;
  virtual int64_t classes() const = 0;

  Shape inputShape() const override { return {features()}; }
  std::optional<int64_t> classCount() const override { return classes(); }

 private:
  void fillSamples(std::span<const int64_t> indices, void* inputs_out,
                   void* targets_out) const final {
    fillChecked(indices, static_cast<float*>(inputs_out), static_cast<int32_t*>(targets_out));
  }
  // Features into features_out[indices.size() * features()], labels into
  // labels_out[indices.size()], the indices checked.
  virtual void fillChecked(std::span<const int64_t> indices, float* features_out,
                           int32_t* labels_out) const = 0;
};

// One batch on a device.
struct Batch {
  Tensor inputs;   // [n, inputShape()...] of inputDType()
  Tensor targets;  // [n, targetShape()...] of targetDType()
};

// Gathers the samples `indices` names on the host and moves them to `device`.
Batch makeBatch(const Dataset& dataset, std::span<const int64_t> indices,
                Device device = Device::cpu());

}  // namespace ringmaster
