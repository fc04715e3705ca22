// A synthetic classification set with a learnable structure: inputs x ~ N(0, 1) and labels from a
// fixed random "teacher" MLP (features -> 64 tanh -> classes). Everything depends only on the seed,
// so every rank of a job sees the same dataset without sharing files. It models no real data.
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace ringmaster {

class SyntheticTeacherDataset : public ClassificationDataset {
 public:
  // Precomputes the samples when they fit in kMaxPrecomputedBytes, otherwise generates each sample
  // when it is asked for; both give the same values.
  // samples >= 0, features >= 1, 1 <= classes <= 65536 (kInvalidArgument otherwise).
  SyntheticTeacherDataset(int64_t samples, int64_t features, int64_t classes, uint64_t seed);

  int64_t size() const override { return samples_; }
  int64_t features() const override { return features_; }
  int64_t classes() const override { return classes_; }
  bool precomputed() const { return !inputs_.empty() || samples_ == 0; }

  // Width of the teacher's hidden layer.
  static constexpr int64_t kHidden = 64;
  // Above this many bytes of inputs, samples are generated on the fly.
  static constexpr int64_t kMaxPrecomputedBytes = int64_t{256} << 20;

 private:
  void fillChecked(std::span<const int64_t> indices, float* features_out,
                   int32_t* labels_out) const override;
  // Sample i's inputs (depend only on (seed, i)) into x[features].
  void generateInputs(int64_t i, float* x) const;
  // The teacher's bias-free logits[classes] for inputs x; hidden[kHidden] is scratch.
  void teacherLogits(const float* x, float* hidden, float* logits) const;
  // The teacher's class for inputs x, with scratch[scratchSize()].
  int32_t teacherLabel(const float* x, float* scratch) const;
  int64_t scratchSize() const { return kHidden + classes_; }
  // Per-class output biases that spread a calibration sample evenly over the classes.
  void calibrateBiases();

  int64_t samples_, features_, classes_;
  uint64_t seed_;
  // Teacher: hidden = tanh(x w1_), logits = hidden w2_ + b2_ (no hidden bias).
  std::vector<float> w1_;  // [features, kHidden], N(0, 1/features)
  std::vector<float> w2_;  // [kHidden, classes], N(0, 1/kHidden)
  std::vector<float> b2_;  // [classes], calibrated for balance
  // When precomputed: inputs [samples, features] and labels [samples].
  std::vector<float> inputs_;
  std::vector<int32_t> labels_;
};

}  // namespace ringmaster
