// NCCL backend: non-blocking communicators, one stream, CUDA events for completion and timing.
#include "comm/nccl/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

#define RM_NCCL_CHECK(call)                                                               \
  do {                                                                                    \
    ncclResult_t rm_nccl_ = (call);                                                       \
    if (rm_nccl_ != ncclSuccess && rm_nccl_ != ncclInProgress) {                          \
      RM_THROW(kComm, fmt::format("{} failed: {}", #call, ncclGetErrorString(rm_nccl_))); \
    }                                                                                     \
  } while (0)

#define RM_NCCL_CUDA_CHECK(call)                                                          \
  do {                                                                                    \
    cudaError_t rm_cuda_ = (call);                                                        \
    if (rm_cuda_ != cudaSuccess) {                                                        \
      RM_THROW(kCuda, fmt::format("{} failed: {}", #call, cudaGetErrorString(rm_cuda_))); \
    }                                                                                     \
  } while (0)

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      return ncclUint8;
  }
  return ncclFloat32;
}

// Waits for a non-blocking communicator to leave ncclInProgress; throws on error or deadline.
void settle(ncclComm_t comm, Clock::time_point deadline, const char* what) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    RM_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress)
      RM_THROW(kComm, fmt::format("nccl {}: {}", what, ncclGetErrorString(state)));
    if (Clock::now() >= deadline) RM_THROW(kTimeout, fmt::format("nccl {}: timed out", what));
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

struct NcclBackend::State {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  std::mutex mutex;
  bool aborted = false;
};

namespace {

class NcclOp : public PendingOp {
 public:
  NcclOp(ncclComm_t comm, int device, cudaEvent_t start, cudaEvent_t end, std::vector<Tensor> keep,
         std::function<void()> finish)
      : comm_(comm),
        device_(device),
        start_(start),
        end_(end),
        keep_(std::move(keep)),
        finish_(std::move(finish)) {}
  ~NcclOp() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(end_);
  }

  void wait(Clock::time_point deadline) override {
    RM_NCCL_CUDA_CHECK(cudaSetDevice(device_));
    for (;;) {
      cudaError_t state = cudaEventQuery(end_);
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady)
        RM_THROW(kCuda, fmt::format("nccl op: {}", cudaGetErrorString(state)));
      ncclResult_t async = ncclSuccess;
      RM_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        RM_THROW(kComm, fmt::format("nccl: {}", ncclGetErrorString(async)));
      }
      if (Clock::now() >= deadline) RM_THROW(kTimeout, "nccl: operation did not complete in time");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start_, end_) == cudaSuccess) device_ms_ = ms;
    if (finish_) finish_();
  }
  std::optional<double> deviceMs() const override { return device_ms_; }

 private:
  ncclComm_t comm_;
  int device_;
  cudaEvent_t start_, end_;
  std::vector<Tensor> keep_;
  std::function<void()> finish_;
  std::optional<double> device_ms_;
};

std::unique_ptr<NcclBackend::State> joinComm(const std::shared_ptr<Store>& store, int rank,
                                             int size, int device,
                                             std::chrono::milliseconds timeout) {
  auto state = std::make_unique<NcclBackend::State>();
  state->device = device;
  state->rank = rank;
  state->size = size;
  state->timeout = timeout;
  RM_NCCL_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id;
  if (rank == 0) {
    RM_NCCL_CHECK(ncclGetUniqueId(&id));
    if (size > 1)
      store->set("nccl_unique_id", Bytes(reinterpret_cast<uint8_t*>(&id),
                                         reinterpret_cast<uint8_t*>(&id) + sizeof(id)));
  } else {
    Bytes bytes = store->get("nccl_unique_id");
    RM_ENFORCE(bytes.size() == sizeof(id), "nccl unique id has the wrong size");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  RM_NCCL_CHECK(ncclCommInitRankConfig(&state->comm, size, id, rank, &config));
  try {
    settle(state->comm, Clock::now() + timeout, "init");
  } catch (...) {
    ncclCommAbort(state->comm);
    throw;
  }
  RM_NCCL_CUDA_CHECK(cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking));
  return state;
}

}  // namespace

NcclBackend::NcclBackend(std::unique_ptr<State> state)
    : state_(std::move(state)), device_(state_->device) {}

NcclBackend::~NcclBackend() {
  cudaSetDevice(state_->device);
  if (state_->stream) cudaStreamSynchronize(state_->stream);
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->comm && !state_->aborted) {
    if (ncclCommFinalize(state_->comm) == ncclSuccess) {
      ncclResult_t s = ncclInProgress;
      auto deadline = Clock::now() + std::chrono::seconds(10);
      while (ncclCommGetAsyncError(state_->comm, &s) == ncclSuccess && s == ncclInProgress &&
             Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    ncclCommDestroy(state_->comm);
  }
  if (state_->stream) cudaStreamDestroy(state_->stream);
}

std::unique_ptr<NcclBackend> NcclBackend::connect(std::shared_ptr<Store> store, int rank, int size,
                                                  int cuda_device,
                                                  std::chrono::milliseconds timeout) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    RM_THROW(kUnavailable, "backend nccl needs a CUDA device and this machine has none");
  }
  RM_CHECK_ARG(
      cuda_device >= 0 && cuda_device < count,
      fmt::format("nccl: CUDA device {} does not exist (this machine has {})", cuda_device, count));
  return std::unique_ptr<NcclBackend>(
      new NcclBackend(joinComm(store, rank, size, cuda_device, timeout)));
}

std::unique_ptr<Backend> NcclBackend::split(std::shared_ptr<Store> store, int group_rank,
                                            int group_size) {
  return std::unique_ptr<NcclBackend>(
      new NcclBackend(joinComm(store, group_rank, group_size, state_->device, state_->timeout)));
}

void NcclBackend::abort() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->aborted) return;
  state_->aborted = true;
  ncclCommAbort(state_->comm);
}

std::unique_ptr<PendingOp> NcclBackend::launch(const OpCall& call) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->aborted) RM_THROW(kComm, "nccl: the communicator was aborted");
  State& s = *state_;
  RM_NCCL_CUDA_CHECK(cudaSetDevice(s.device));
  cudaEvent_t ready, start, end;
  RM_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  RM_NCCL_CUDA_CHECK(cudaEventCreate(&start));
  RM_NCCL_CUDA_CHECK(cudaEventCreate(&end));
  // The communication stream waits for what the compute stream queued before this call.
  RM_NCCL_CUDA_CHECK(cudaEventRecord(ready, nullptr));
  RM_NCCL_CUDA_CHECK(cudaStreamWaitEvent(s.stream, ready, 0));
  cudaEventDestroy(ready);
  RM_NCCL_CUDA_CHECK(cudaEventRecord(start, s.stream));

  Tensor in = call.input;
  Tensor out = call.output;
  std::vector<Tensor> keep{in, out};
  std::function<void()> finish;
  auto deadline = Clock::now() + call.timeout;
  auto type = ncclType(in.defined() ? in.dtype() : out.dtype());
  bool bitwise = call.reduce == ReduceKind::kBand || call.reduce == ReduceKind::kBor ||
                 call.reduce == ReduceKind::kBxor;
  ncclRedOp_t op = ncclSum;
  bool premul = false;
  switch (call.reduce) {
    case ReduceKind::kSum:
      op = ncclSum;
      break;
    case ReduceKind::kAvg:
      op = ncclAvg;
      break;
    case ReduceKind::kProduct:
      op = ncclProd;
      break;
    case ReduceKind::kMin:
      op = ncclMin;
      break;
    case ReduceKind::kMax:
      op = ncclMax;
      break;
    case ReduceKind::kPremulSum: {
      premul = true;
      if (in.dtype() == DType::kF64) {
        double factor = call.premul_factor;
        RM_NCCL_CHECK(
            ncclRedOpCreatePreMulSum(&op, &factor, type, ncclScalarHostImmediate, s.comm));
      } else {
        // The scalar's type must be the tensor's; bf16 / fp16 scalars are passed as float bits
        // rounded the same way the host path rounds them.
        float factor = static_cast<float>(call.premul_factor);
        uint16_t half = in.dtype() == DType::kBF16 ? floatToBf16(factor) : floatToHalf(factor);
        void* scalar =
            in.dtype() == DType::kF32 ? static_cast<void*>(&factor) : static_cast<void*>(&half);
        RM_NCCL_CHECK(ncclRedOpCreatePreMulSum(&op, scalar, type, ncclScalarHostImmediate, s.comm));
      }
      break;
    }
    default:
      break;
  }

  // Bitwise reductions: gather every rank's tensor, reduce on the host, copy back.
  auto bitwiseVia = [&](const Tensor& contribution, Tensor target, int block_of_rank_or_all,
                        bool only_root) {
    Tensor all = Tensor::empty({contribution.numel() * s.size}, contribution.dtype(),
                               Device::cuda(s.device));
    keep.push_back(all);
    RM_NCCL_CHECK(ncclAllGather(contribution.raw(), all.raw(),
                                static_cast<size_t>(contribution.numel()), type, s.comm, s.stream));
    finish = [all, target, n = s.size, kind = call.reduce, block_of_rank_or_all, only_root,
              rank = s.rank]() mutable {
      if (only_root && rank != block_of_rank_or_all) return;
      Tensor host = all.to(Device::cpu());
      int64_t per = host.numel() / n;
      size_t elem = dtypeSize(host.dtype());
      auto* base = static_cast<uint8_t*>(host.raw());
      for (int r = 1; r < n; ++r)
        reduceInto(kind, host.dtype(), base, base + static_cast<size_t>(r * per) * elem,
                   static_cast<size_t>(per));
      Tensor result = Tensor::empty({per}, host.dtype());
      std::memcpy(result.raw(), base, static_cast<size_t>(per) * elem);
      target.copyFrom(result.view(target.shape()));
    };
  };

  size_t count = in.defined() ? static_cast<size_t>(in.numel()) : 0;
  switch (call.op) {
    case CommOp::kAllReduce:
      if (bitwise)
        bitwiseVia(in, in, -1, false);
      else
        RM_NCCL_CHECK(ncclAllReduce(in.raw(), const_cast<void*>(in.raw()), count, type, op, s.comm,
                                    s.stream));
      break;
    case CommOp::kBroadcast:
      RM_NCCL_CHECK(ncclBroadcast(in.raw(), const_cast<void*>(in.raw()), count, type, call.peer,
                                  s.comm, s.stream));
      break;
    case CommOp::kReduce:
      if (bitwise)
        bitwiseVia(in, in, call.peer, true);
      else
        RM_NCCL_CHECK(ncclReduce(in.raw(), const_cast<void*>(in.raw()), count, type, op, call.peer,
                                 s.comm, s.stream));
      break;
    case CommOp::kAllGather:
      RM_NCCL_CHECK(
          ncclAllGather(in.raw(), const_cast<void*>(out.raw()), count, type, s.comm, s.stream));
      break;
    case CommOp::kReduceScatter:
      if (bitwise) {
        // Each rank keeps its block of the full reduction.
        Tensor full = Tensor::empty({in.numel()}, in.dtype(), Device::cuda(s.device));
        keep.push_back(full);
        bitwiseVia(in, full, -1, false);
        auto reduce_all = finish;
        finish = [reduce_all, full, out, rank = s.rank]() mutable {
          reduce_all();
          out.copyFrom(full.narrowRows(rank * out.numel(), out.numel()).view(out.shape()));
        };
      } else {
        RM_NCCL_CHECK(ncclReduceScatter(in.raw(), const_cast<void*>(out.raw()),
                                        static_cast<size_t>(out.numel()), type, op, s.comm,
                                        s.stream));
      }
      break;
    case CommOp::kAllToAll:
    case CommOp::kGather:
    case CommOp::kScatter: {
      size_t elem = dtypeSize(in.defined() ? in.dtype() : out.dtype());
      RM_NCCL_CHECK(ncclGroupStart());
      if (call.op == CommOp::kAllToAll) {
        size_t block = count / static_cast<size_t>(s.size);
        for (int r = 0; r < s.size; ++r) {
          RM_NCCL_CHECK(ncclSend(static_cast<const uint8_t*>(in.raw()) + r * block * elem, block,
                                 type, r, s.comm, s.stream));
          RM_NCCL_CHECK(
              ncclRecv(static_cast<uint8_t*>(const_cast<void*>(out.raw())) + r * block * elem,
                       block, type, r, s.comm, s.stream));
        }
      } else if (call.op == CommOp::kGather) {
        RM_NCCL_CHECK(ncclSend(in.raw(), count, type, call.peer, s.comm, s.stream));
        if (s.rank == call.peer) {
          for (int r = 0; r < s.size; ++r) {
            RM_NCCL_CHECK(
                ncclRecv(static_cast<uint8_t*>(const_cast<void*>(out.raw())) + r * count * elem,
                         count, type, r, s.comm, s.stream));
          }
        }
      } else {
        size_t block = static_cast<size_t>(out.numel());
        if (s.rank == call.peer) {
          for (int r = 0; r < s.size; ++r) {
            RM_NCCL_CHECK(ncclSend(static_cast<const uint8_t*>(in.raw()) + r * block * elem, block,
                                   type, r, s.comm, s.stream));
          }
        }
        RM_NCCL_CHECK(
            ncclRecv(const_cast<void*>(out.raw()), block, type, call.peer, s.comm, s.stream));
      }
      RM_NCCL_CHECK(ncclGroupEnd());
      break;
    }
    case CommOp::kBarrier: {
      // An all-reduce of one byte, as ProcessGroupNCCL's barrier.
      Tensor one = Tensor::zeros({1}, DType::kU8, Device::cuda(s.device));
      keep.push_back(one);
      RM_NCCL_CHECK(ncclAllReduce(one.raw(), one.raw(), 1, ncclUint8, ncclSum, s.comm, s.stream));
      break;
    }
    case CommOp::kSend:
      RM_NCCL_CHECK(ncclSend(in.raw(), count, type, call.peer, s.comm, s.stream));
      break;
    case CommOp::kRecv:
      RM_NCCL_CHECK(
          ncclRecv(const_cast<void*>(in.raw()), count, type, call.peer, s.comm, s.stream));
      break;
  }
  settle(s.comm, deadline, toString(call.op).data());
  if (premul) ncclRedOpDestroy(op, s.comm);
  RM_NCCL_CUDA_CHECK(cudaEventRecord(end, s.stream));
  return std::make_unique<NcclOp>(s.comm, s.device, start, end, std::move(keep), std::move(finish));
}

}  // namespace ringmaster
