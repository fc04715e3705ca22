// The windowing of TokenWindowDataset: sample index -> (run, offset), and the copy of a window's
// ids into int32 inputs and targets.
#include "data/token_windows.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

namespace {

// Token `i` of a run, widened to int64.
int64_t tokenAt(const TokenWindowDataset::Run& run, int64_t i) {
  const auto* bytes = static_cast<const uint8_t*>(run.data) + i * run.width;
  switch (run.width) {
    case 1:
      return bytes[0];
    case 2: {
      uint16_t v;
      std::memcpy(&v, bytes, 2);
      return v;
    }
    default: {
      uint32_t v;
      std::memcpy(&v, bytes, 4);
      return v;
    }
  }
}

}  // namespace

TokenWindowDataset::TokenWindowDataset(int64_t context, int64_t vocab_size)
    : context_(context), vocab_size_(vocab_size), run_starts_{0} {
  RM_CHECK_ARG(context >= 1, fmt::format("context must be at least 1, got {}", context));
  RM_CHECK_ARG(vocab_size >= 1, fmt::format("vocab_size must be at least 1, got {}", vocab_size));
}

void TokenWindowDataset::setRuns(std::vector<Run> runs) {
  runs_ = std::move(runs);
  run_starts_.assign(1, 0);
  for (const Run& run : runs_) {
    RM_ENFORCE(run.width == 1 || run.width == 2 || run.width == 4,
               fmt::format("token width {}", run.width));
    run_starts_.push_back(run_starts_.back() + windowsIn(run.tokens, context_));
  }
  windows_ = run_starts_.back();
}

void TokenWindowDataset::fillSamples(std::span<const int64_t> indices, void* inputs_out,
                                     void* targets_out) const {
  auto* inputs = static_cast<int32_t*>(inputs_out);
  auto* targets = static_cast<int32_t*>(targets_out);
  for (size_t s = 0; s < indices.size(); ++s) {
    const int64_t index = indices[s];
    // The run holding the sample: the last start <= index.
    const auto r = static_cast<size_t>(
        std::upper_bound(run_starts_.begin(), run_starts_.end(), index) - run_starts_.begin() - 1);
    const Run& run = runs_[r];
    const int64_t first = (index - run_starts_[r]) * context_;
    int32_t* in = inputs + static_cast<int64_t>(s) * context_;
    int32_t* target = targets + static_cast<int64_t>(s) * context_;
    for (int64_t t = 0; t < context_; ++t) {
      in[t] = static_cast<int32_t>(tokenAt(run, first + t));
      target[t] = static_cast<int32_t>(tokenAt(run, first + t + 1));
    }
  }
}

int64_t firstTokenAtLeast(const void* data, int64_t count, int width, int64_t vocab_size) {
  const TokenWindowDataset::Run run{data, count, width};
  for (int64_t i = 0; i < count; ++i)
    if (tokenAt(run, i) >= vocab_size) return i;
  return -1;
}

}  // namespace ringmaster
