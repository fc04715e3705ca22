// DistributedSampler with the semantics of torch.utils.data.DistributedSampler (sample counts,
// padding by repetition, drop_last truncation, rank striding, seed + epoch shuffles), and
// BatchIterator, which walks one rank's indices in fixed-size batches across epochs forever.
// The shuffled order comes from our counter-based Rng (Fisher-Yates), so it differs from
// torch.randperm's: the same seed gives the same order on every rank, not PyTorch's order.
#pragma once

#include <cstdint>
#include <vector>

namespace ringmaster {

class DistributedSampler {
 public:
  // dataset_size >= 0, num_replicas >= 1, 0 <= rank < num_replicas (kInvalidArgument otherwise).
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  // The epoch seeds the shuffle (seed + epoch), as in PyTorch; call it before each epoch.
  void setEpoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // This rank's indices for the current epoch, numSamples() of them. All ranks order the whole
  // dataset by the same permutation; without drop_last it is padded to totalSize() by repeating it
  // from the start (as often as needed), with drop_last it is cut to totalSize(); rank r takes
  // positions r, r + replicas, r + 2 * replicas, ...
  std::vector<int64_t> indices() const;

  // drop_last ? floor(size / replicas) : ceil(size / replicas); PyTorch writes the drop_last case
  // as ceil((size - replicas) / replicas) when the division is not exact, which is the same.
  int64_t numSamples() const { return num_samples_; }
  int64_t totalSize() const { return num_samples_ * num_replicas_; }
  int64_t datasetSize() const { return dataset_size_; }
  int numReplicas() const { return num_replicas_; }
  int rank() const { return rank_; }

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

// Hands out one rank's sample indices batch_size at a time, epoch after epoch, like iterating a
// DataLoader(sampler=..., batch_size=..., drop_last=True) inside an endless epoch loop that calls
// sampler.set_epoch(epoch): the last partial batch of each epoch (numSamples() % batch_size
// indices) is dropped, so every batch has exactly batch_size indices.
class BatchIterator {
 public:
  // Keeps its own copy of the sampler and starts at the sampler's epoch. A rank with fewer than
  // batch_size samples per epoch could never produce a batch: kInvalidArgument.
  BatchIterator(DistributedSampler sampler, int64_t batch_size);

  // The next batch's indices; at the end of an epoch moves to the next (setEpoch(epoch + 1)).
  std::vector<int64_t> next();
  // Positions the iterator as if next() had been called `batches` times since construction (for
  // resuming a run at a step).
  void seek(int64_t batches);

  int64_t batchSize() const { return batch_size_; }
  int64_t batchesPerEpoch() const { return batches_per_epoch_; }
  // The epoch the next batch comes from.
  int64_t epoch() const { return sampler_.epoch() + (next_batch_ == batches_per_epoch_ ? 1 : 0); }

 private:
  DistributedSampler sampler_;
  int64_t batch_size_;
  int64_t batches_per_epoch_;
  int64_t first_epoch_;
  std::vector<int64_t> epoch_indices_;  // the current epoch's indices
  int64_t next_batch_ = 0;              // within the current epoch
};

}  // namespace ringmaster
