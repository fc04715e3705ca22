// Data parallelism over a pipeline stage's parameters: what the dp dimension does when the mesh
// also has pp > 1, where the pipeline runs the stage's modules itself. After the step's schedule
// has run (Megatron-LM's gradient reduction after the pipeline flush), the replicas' gradients
// are averaged over the dp group in one flat buffer: as DDP, or, as FSDP, reduce-scattered into
// this rank's shard of a flat parameter that the optimizer updates and that is all-gathered back
// before the next forward. Under pp the stage's parameters stay gathered through the step (as
// torchtitan runs FSDP with pipeline parallelism: reshard_after_forward off) and so does the flat
// gradient the stage's micro-batches accumulate into; the reduced gradient and the optimizer
// state are sharded.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"
#include "parallel/ddp.h"  // GradientSyncTiming

namespace ringmaster {

class ReplicaGradients {
 public:
  // Takes rank 0's values over `dp` (sync_module_states) and moves the parameters' values and
  // gradients into flat buffers they view. `sharded`: FSDP's split of gradients and optimizer
  // state.
  ReplicaGradients(std::vector<NamedParameter> parameters, Communicator& dp, bool sharded);

  // Averages the accumulated gradients over the replicas (sharded: into the shard's gradient,
  // adding to it, and the full gradients zeroed). Returns its communication time.
  GradientSyncTiming reduce();
  // Sharded: the all-gather of the updated shards into the parameters, once after each optimizer
  // step (a no-op when nothing changed since). Call before anything reads the parameters.
  void gatherIfStale();
  // What the optimizer updates: the parameters, or the one flat shard ("flat_param.stage").
  std::vector<NamedParameter> optimizerParameters();
  // The parameters in the flat buffers' order, whether the gradients are sharded, and this rank's
  // shard of the flat gradient with its first element's index (for the norm, which counts each
  // element once across replicas).
  const std::vector<NamedParameter>& parameters() const { return parameters_; }
  bool sharded() const { return sharded_; }
  const Tensor& shardGrad() const { return shard_.grad; }
  int64_t shardStart() const { return sharded_ ? dp_.rank() * shard_.grad.numel() : 0; }

 private:
  std::vector<NamedParameter> parameters_;
  Communicator& dp_;
  bool sharded_;
  int64_t numel_ = 0, padded_numel_ = 0;
  Tensor flat_value_, flat_grad_;
  Parameter shard_;     // sharded: this rank's slice of the flat parameter
  bool stale_ = false;  // sharded: the shard may have changed since the last gather
};

}  // namespace ringmaster
