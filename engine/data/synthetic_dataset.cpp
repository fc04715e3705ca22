// The synthetic teacher dataset: counter-based inputs, a seeded teacher MLP, and per-class output
// biases calibrated so that the classes come out roughly balanced.
#include "data/synthetic_dataset.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"

namespace ringmaster {

namespace {

// Salts that split one user seed into independent streams.
constexpr uint64_t kInputSalt = 0x5EED'DA7A'0000'0001ull;
constexpr uint64_t kTeacherSalt = 0x5EED'DA7A'0000'0002ull;
constexpr uint64_t kCalibrationSalt = 0x5EED'DA7A'0000'0003ull;

// Sample i of a stream: `features` standard normals that depend only on (stream, i). Box-Muller
// with both of its outputs (cos and sin), so one pair of uniforms gives two values.
void normalInputs(uint64_t stream, int64_t i, int64_t features, float* x) {
  Rng rng(mix64(stream + static_cast<uint64_t>(i)));
  for (int64_t j = 0; j < features; j += 2) {
    double u1 = rng.nextDouble();
    const double u2 = rng.nextDouble();
    if (u1 < 1e-300) u1 = 1e-300;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 6.283185307179586 * u2;
    x[j] = static_cast<float>(radius * std::cos(angle));
    if (j + 1 < features) x[j + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

// Runs body(begin, end) over [0, count) split across a few threads.
template <typename Body>
void parallelFor(int64_t count, int64_t work_per_item, Body body) {
  const int64_t total_work = count * std::max<int64_t>(work_per_item, 1);
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const int64_t threads =
      std::clamp<int64_t>(total_work / (int64_t{1} << 22), 1, std::min<int64_t>(hw, 16));
  if (threads <= 1 || count < threads) {
    body(int64_t{0}, count);
    return;
  }
  std::vector<std::thread> pool;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t begin = count * t / threads, end = count * (t + 1) / threads;
    pool.emplace_back([&, begin, end] {
      try {
        body(begin, end);
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

SyntheticTeacherDataset::SyntheticTeacherDataset(int64_t samples, int64_t features, int64_t classes,
                                                 uint64_t seed)
    : samples_(samples), features_(features), classes_(classes), seed_(seed) {
  RM_CHECK_ARG(samples >= 0, fmt::format("synthetic data: samples must be >= 0, got {}", samples));
  RM_CHECK_ARG(features >= 1,
               fmt::format("synthetic data: features must be >= 1, got {}", features));
  RM_CHECK_ARG(classes >= 1 && classes <= (int64_t{1} << 16),
               fmt::format("synthetic data: classes must be in [1, 65536], got {}", classes));

  Rng rng(mix64(seed ^ kTeacherSalt));
  const double w1_scale = 1.0 / std::sqrt(static_cast<double>(features));
  const double w2_scale = 1.0 / std::sqrt(static_cast<double>(kHidden));
  w1_.resize(static_cast<size_t>(kHidden * features));
  for (float& w : w1_) w = static_cast<float>(rng.normal() * w1_scale);
  w2_.resize(static_cast<size_t>(classes * kHidden));
  for (float& w : w2_) w = static_cast<float>(rng.normal() * w2_scale);
  b2_.assign(static_cast<size_t>(classes), 0.0f);
  calibrateBiases();

  if (samples > 0 && samples <= kMaxPrecomputedBytes / (features * int64_t{sizeof(float)})) {
    inputs_.resize(static_cast<size_t>(samples * features));
    labels_.resize(static_cast<size_t>(samples));
    parallelFor(samples, features * kHidden, [&](int64_t begin, int64_t end) {
      std::vector<float> scratch(scratchSize());
      for (int64_t i = begin; i < end; ++i) {
        float* x = inputs_.data() + i * features_;
        generateInputs(i, x);
        labels_[i] = teacherLabel(x, scratch.data());
      }
    });
  }
}

void SyntheticTeacherDataset::generateInputs(int64_t i, float* x) const {
  normalInputs(mix64(seed_ ^ kInputSalt), i, features_, x);
}

void SyntheticTeacherDataset::teacherLogits(const float* x, float* hidden, float* logits) const {
  // Each output is its own sum over j in a fixed order, so the inner loops vectorise across
  // outputs and the result does not depend on the vector width.
  std::fill(hidden, hidden + kHidden, 0.0f);
  for (int64_t j = 0; j < features_; ++j) {
    const float* w = w1_.data() + j * kHidden;
    const float xj = x[j];
    for (int64_t h = 0; h < kHidden; ++h) hidden[h] += w[h] * xj;
  }
  for (int64_t h = 0; h < kHidden; ++h) hidden[h] = std::tanh(hidden[h]);
  std::fill(logits, logits + classes_, 0.0f);
  for (int64_t h = 0; h < kHidden; ++h) {
    const float* w = w2_.data() + h * classes_;
    const float hh = hidden[h];
    for (int64_t c = 0; c < classes_; ++c) logits[c] += w[c] * hh;
  }
}

int32_t SyntheticTeacherDataset::teacherLabel(const float* x, float* scratch) const {
  float* logits = scratch + kHidden;
  teacherLogits(x, scratch, logits);
  int32_t best = 0;
  float best_logit = logits[0] + b2_[0];
  for (int64_t c = 1; c < classes_; ++c) {
    const float logit = logits[c] + b2_[c];
    if (logit > best_logit) {
      best = static_cast<int32_t>(c);
      best_logit = logit;
    }
  }
  return best;
}

// Draws a calibration sample from its own stream, computes the teacher's bias-free logits, and
// nudges each class's bias towards an equal share (a decaying-step fixed point iteration). Without
// it the class whose output weights happen to be largest takes far more than its share.
void SyntheticTeacherDataset::calibrateBiases() {
  if (classes_ == 1) return;
  const int64_t budget = int64_t{1} << 23;  // calibration samples x classes
  const int64_t count = std::clamp<int64_t>(budget / classes_, 256, 8192);
  std::vector<float> logits(static_cast<size_t>(count * classes_));
  parallelFor(count, features_ * kHidden, [&](int64_t begin, int64_t end) {
    std::vector<float> x(features_), hidden(kHidden);
    for (int64_t i = begin; i < end; ++i) {
      normalInputs(mix64(seed_ ^ kCalibrationSalt), i, features_, x.data());
      teacherLogits(x.data(), hidden.data(), logits.data() + i * classes_);
    }
  });
  double sum_sq = 0.0;
  for (float v : logits) sum_sq += static_cast<double>(v) * v;
  const double logit_std = std::sqrt(sum_sq / static_cast<double>(logits.size())) + 1e-12;

  const int iterations = 200;
  const double target = 1.0 / static_cast<double>(classes_);
  std::vector<double> bias(static_cast<size_t>(classes_), 0.0);
  std::vector<int64_t> counts(static_cast<size_t>(classes_));
  for (int it = 0; it < iterations; ++it) {
    std::fill(counts.begin(), counts.end(), 0);
    for (int64_t i = 0; i < count; ++i) {
      const float* row = logits.data() + i * classes_;
      int64_t best = 0;
      double best_value = row[0] + bias[0];
      for (int64_t c = 1; c < classes_; ++c) {
        const double value = row[c] + bias[c];
        if (value > best_value) best = c, best_value = value;
      }
      ++counts[best];
    }
    const double step = 0.5 * logit_std * static_cast<double>(classes_) *
                        (1.0 - static_cast<double>(it) / iterations);
    for (int64_t c = 0; c < classes_; ++c) {
      bias[c] += step * (target - static_cast<double>(counts[c]) / static_cast<double>(count));
    }
  }
  for (int64_t c = 0; c < classes_; ++c) b2_[c] = static_cast<float>(bias[c]);
}

void SyntheticTeacherDataset::fillChecked(std::span<const int64_t> indices, float* features_out,
                                          int32_t* labels_out) const {
  if (precomputed()) {
    for (size_t k = 0; k < indices.size(); ++k) {
      const float* x = inputs_.data() + indices[k] * features_;
      std::copy(x, x + features_, features_out + static_cast<int64_t>(k) * features_);
      labels_out[k] = labels_[indices[k]];
    }
    return;
  }
  parallelFor(static_cast<int64_t>(indices.size()), features_ * kHidden,
              [&](int64_t begin, int64_t end) {
                std::vector<float> scratch(scratchSize());
                for (int64_t k = begin; k < end; ++k) {
                  float* x = features_out + k * features_;
                  generateInputs(indices[k], x);
                  labels_out[k] = teacherLabel(x, scratch.data());
                }
              });
}

}  // namespace ringmaster
