// TokenWindowDataset: next-token samples cut from runs of token ids, the windowing shared by the
// llm.c token shards (token_shards.h) and byte-level text (text_dataset.h). Sample i is a window
// of context + 1 tokens starting at a multiple of context within one run (windows never cross
// runs); its inputs are the first context tokens, its targets the last context, both int32.
// It holds no files: the runs' memory belongs to the subclass.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/dataset.h"

namespace ringmaster {

class TokenWindowDataset : public Dataset {
 public:
  // One run of token ids: `tokens` ids of `width` bytes each (1, 2 or 4; little-endian,
  // unsigned), starting at `data`. The memory must outlive the dataset.
  struct Run {
    const void* data = nullptr;
    int64_t tokens = 0;
    int width = 0;
  };

  // The windows a run of `tokens` ids holds at `context` tokens per sample: (tokens - 1) /
  // context, as llm.c's loader counts a shard's samples (the last window needs one more token).
  static int64_t windowsIn(int64_t tokens, int64_t context) {
    return tokens < 1 ? 0 : (tokens - 1) / context;
  }

  int64_t size() const override { return windows_; }
  Shape inputShape() const override { return {context_}; }
  DType inputDType() const override { return DType::kI32; }
  Shape targetShape() const override { return {context_}; }
  DType targetDType() const override { return DType::kI32; }

  int64_t context() const { return context_; }
  // Every window's tokens are below this (the model's vocabulary, checked by the loader).
  int64_t vocabSize() const { return vocab_size_; }
  // Windows before run r, for r in [0, runs]: run r holds samples [runStart(r), runStart(r + 1)).
  int64_t runStart(size_t r) const { return run_starts_.at(r); }
  size_t runCount() const { return runs_.size(); }

 protected:
  // context >= 1 and vocab_size >= 1 (kInvalidArgument otherwise).
  TokenWindowDataset(int64_t context, int64_t vocab_size);
  // Sets the runs (in sample order); call once their memory is in place and checked.
  void setRuns(std::vector<Run> runs);

 private:
  void fillSamples(std::span<const int64_t> indices, void* inputs_out,
                   void* targets_out) const override;

  int64_t context_;
  int64_t vocab_size_;
  std::vector<Run> runs_;
  std::vector<int64_t> run_starts_;  // [runs + 1], cumulative windows
  int64_t windows_ = 0;
};

// The first position in tokens[0, count) of `width`-byte ids whose id is >= vocab_size, or -1.
int64_t firstTokenAtLeast(const void* data, int64_t count, int width, int64_t vocab_size);

}  // namespace ringmaster
