// The distributed sampler's index arithmetic (as torch.utils.data.DistributedSampler) and the
// endless batch iterator over it.
#include "data/distributed_sampler.h"

#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"

namespace ringmaster {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  RM_CHECK_ARG(dataset_size >= 0,
               fmt::format("sampler: dataset size must be >= 0, got {}", dataset_size));
  RM_CHECK_ARG(num_replicas >= 1,
               fmt::format("sampler: num_replicas must be >= 1, got {}", num_replicas));
  RM_CHECK_ARG(rank >= 0 && rank < num_replicas,
               fmt::format("sampler: rank {} is outside [0, {})", rank, num_replicas));
  num_samples_ =
      drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order(static_cast<size_t>(dataset_size_));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle_) {
    // Fisher-Yates, seeded with seed + epoch like PyTorch's generator.
    Rng rng(seed_ + static_cast<uint64_t>(epoch_));
    for (int64_t i = dataset_size_ - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
      std::swap(order[i], order[j]);
    }
  }
  // Position p of the padded (or cut) list is order[p % size]: padding repeats the list from its
  // start as often as needed, and truncation keeps only positions below totalSize().
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (int64_t p = rank_; p < totalSize(); p += num_replicas_) {
    mine.push_back(order[p % dataset_size_]);
  }
  return mine;
}

BatchIterator::BatchIterator(DistributedSampler sampler, int64_t batch_size)
    : sampler_(std::move(sampler)), batch_size_(batch_size), first_epoch_(sampler_.epoch()) {
  RM_CHECK_ARG(batch_size >= 1, fmt::format("batch size must be >= 1, got {}", batch_size));
  batches_per_epoch_ = sampler_.numSamples() / batch_size;
  RM_CHECK_ARG(batches_per_epoch_ >= 1,
               fmt::format("batch size {} exceeds the {} samples rank {} of {} gets per epoch "
                           "(dataset of {} samples); lower the batch size or add data",
                           batch_size, sampler_.numSamples(), sampler_.rank(),
                           sampler_.numReplicas(), sampler_.datasetSize()));
  epoch_indices_ = sampler_.indices();
}

std::vector<int64_t> BatchIterator::next() {
  if (next_batch_ == batches_per_epoch_) {
    sampler_.setEpoch(sampler_.epoch() + 1);
    epoch_indices_ = sampler_.indices();
    next_batch_ = 0;
  }
  const auto begin = epoch_indices_.begin() + next_batch_ * batch_size_;
  ++next_batch_;
  return std::vector<int64_t>(begin, begin + batch_size_);
}

void BatchIterator::seek(int64_t batches) {
  RM_CHECK_ARG(batches >= 0, fmt::format("cannot seek to batch {}", batches));
  sampler_.setEpoch(first_epoch_ + batches / batches_per_epoch_);
  epoch_indices_ = sampler_.indices();
  next_batch_ = batches % batches_per_epoch_;
}

}  // namespace ringmaster
