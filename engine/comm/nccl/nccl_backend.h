// The NCCL backend: CUDA tensors over NCCL (the CUDA toolkit's), on a dedicated stream that waits
// for the compute stream. Communicators are non-blocking so that a timeout or a peer's failure can
// ncclCommAbort them; every operation is timed with CUDA events. NCCL lacks the bitwise reduce
// ops, so BAND / BOR / BXOR are composed (all_gather, then the reduction on the host). NCCL itself
// is opened at the first connect(), never at start-up: a process on the CPU does not map it.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "comm/backend.h"

namespace ringmaster {

class NcclBackend : public Backend {
 public:
  // Rank 0 makes the NCCL unique id and publishes it in `store`; every rank then joins.
  static std::unique_ptr<NcclBackend> connect(std::shared_ptr<Store> store, int rank, int size,
                                              int cuda_device, std::chrono::milliseconds timeout);
  ~NcclBackend() override;
  // Opens NCCL (which connect() does first, and the build does not link) and resolves every
  // function the backend calls; returns the file opened. Needs no device. kUnavailable naming the
  // library, the loader's reason (dlerror) and what to install when it cannot.
  static std::string loadLibrary();

  std::string name() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }
  bool nativeReduce(ReduceKind kind) const override { return true; }
  std::unique_ptr<PendingOp> launch(const OpCall& call) override;
  void abort() override;
  std::unique_ptr<Backend> split(std::shared_ptr<Store> store, int group_rank,
                                 int group_size) override;

  struct State;  // the communicator, its stream and device (nccl_backend.cpp)

 private:
  explicit NcclBackend(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
  int device_ = 0;
};

}  // namespace ringmaster
