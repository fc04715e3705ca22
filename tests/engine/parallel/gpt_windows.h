// The token windows the GPT parallel tests train on: an endless pseudo-random text with some
// structure (each token depends on the one before), cut as the token datasets cut it.
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace ringmaster::testing {

// Token k of the text, in [0, vocab).
inline int32_t gptTokenAt(int64_t k, int64_t vocab) {
  uint64_t x = static_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<int32_t>((x % 4 + static_cast<uint64_t>(k % 7) * 3) %
                              static_cast<uint64_t>(vocab));
}

// Sample i: the window of context + 1 tokens starting at token i * context (inputs, and targets
// shifted by one).
inline Batch gptTokenWindows(const std::vector<int64_t>& indices, int64_t vocab, int64_t context) {
  std::vector<int32_t> inputs, targets;
  for (int64_t i : indices) {
    for (int64_t t = 0; t < context; ++t) {
      inputs.push_back(gptTokenAt(i * context + t, vocab));
      targets.push_back(gptTokenAt(i * context + t + 1, vocab));
    }
  }
  const auto rows = static_cast<int64_t>(indices.size());
  return Batch{.inputs = Tensor::fromInts(inputs, {rows, context}),
               .targets = Tensor::fromInts(targets, {rows, context})};
}

}  // namespace ringmaster::testing
