// The dataset interface every trainer reads samples through, and makeBatch, which gathers a batch
// of samples into tensors on a device. Datasets are classification sets: a float feature vector
// and an integer class label per sample. Transforms and augmentation are not part of it.
#pragma once

#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace ringmaster {

class Dataset {
 public:
  virtual ~Dataset() = default;

  // Number of samples, features per sample, and classes (labels lie in [0, classes)).
  virtual int64_t size() const = 0;
  virtual int64_t features() const = 0;
  virtual int64_t classes() const = 0;

  // Writes the samples `indices` names, in that order: features row-major into
  // features_out[indices.size() * features()], labels into labels_out[indices.size()]. An index
  // outside [0, size()) is a kInvalidArgument error. Safe to call from several threads at once.
  void fill(std::span<const int64_t> indices, float* features_out, int32_t* labels_out) const;

 private:
  // fill() after its indices were checked.
  virtual void fillChecked(std::span<const int64_t> indices, float* features_out,
                           int32_t* labels_out) const = 0;
};

// One batch on a device.
struct Batch {
  Tensor features;  // [n, features] F32
  Tensor labels;    // [n] I32
};

// Gathers the samples `indices` names on the host and moves them to `device`.
Batch makeBatch(const Dataset& dataset, std::span<const int64_t> indices,
                Device device = Device::cpu());

}  // namespace ringmaster
