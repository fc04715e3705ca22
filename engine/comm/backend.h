// The interface a communication backend (gloo/, nccl/) implements behind Communicator. A backend
// only moves and reduces bytes: argument checks, sequencing, composed reduce ops, one-rank short
// cuts, timing, the flight recorder, failure propagation and timeouts live in Communicator.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "comm/comm_op.h"
#include "comm/reduce_op.h"
#include "comm/store.h"
#include "tensor/tensor.h"

namespace ringmaster {

// One operation as the backend sees it. Tensors are contiguous, on the backend's device, and of
// the sizes Communicator checked (docs/comm.md lists them per op).
struct OpCall {
  CommOp op = CommOp::kAllReduce;
  uint64_t seq = 0;
  Tensor input;   // all_reduce / broadcast / reduce: the in-place tensor
  Tensor output;  // all_gather, reduce_scatter, all_to_all, gather (root), scatter
  ReduceKind reduce = ReduceKind::kSum;  // SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR; or AVG /
                                         // PREMUL_SUM when the backend does them natively
  double premul_factor = 1.0;
  int peer = -1;  // root of rooted collectives; peer of send / recv
  int tag = 0;    // send / recv
  std::chrono::milliseconds timeout{0};
  // When the operation was launched, in microseconds on the clock aligned to rank 0's
  // (Communicator::alignedNowUs): a send carries it to its receiver, which tells from it how long
  // it waited for the sender.
  int64_t launched_us = 0;
};

// An operation the backend started. wait() returns when it is done, throws its error, or throws a
// kTimeout error once `deadline` passes.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual void wait(std::chrono::steady_clock::time_point deadline) = 0;
  // The duration measured on the device (CUDA events), when the backend has one.
  virtual std::optional<double> deviceMs() const { return std::nullopt; }
  // Time spent waiting for the slowest peer, when the backend can tell it from transfer.
  virtual std::optional<double> waitMs() const { return std::nullopt; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "gloo", "nccl"
  virtual Device device() const = 0;
  // Whether AVG / PREMUL_SUM reach the backend as such (else Communicator composes them from SUM).
  virtual bool nativeReduce(ReduceKind kind) const { return false; }
  // Whether launch() has finished every collective when it returns (its PendingOp waits for
  // nothing): the op thread then completes it itself when nothing queued before it is pending,
  // and a small one called while nothing is in flight runs on its caller's thread.
  virtual bool collectivesCompleteInLaunch() const { return false; }
  // Starts `call`. A backend whose library is synchronous does all the work here.
  virtual std::unique_ptr<PendingOp> launch(const OpCall& call) = 0;
  // Unblocks whatever is in flight so that it fails promptly; the backend is unusable afterwards.
  virtual void abort() = 0;
  // The backend of a sub-group in which this rank is `group_rank` of `group_size`, rendezvousing
  // through `store` (already scoped to the group).
  virtual std::unique_ptr<Backend> split(std::shared_ptr<Store> store, int group_rank,
                                         int group_size) = 0;
};

}  // namespace ringmaster
