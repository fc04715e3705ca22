// NCCL backend: non-blocking communicators, one stream, CUDA events for completion and timing.
// NCCL's functions come from nccl_library.h: the library is opened when the first one connects.
#include "comm/nccl/nccl_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/nccl/nccl_library.h"
#include "core/error.h"

#define RM_NCCL_CHECK(call)                                                                  \
  do {                                                                                       \
    ncclResult_t rm_nccl_ = (call);                                                          \
    if (rm_nccl_ != ncclSuccess && rm_nccl_ != ncclInProgress) {                             \
      RM_THROW(kComm, fmt::format("{} failed: {}", #call, nccl().getErrorString(rm_nccl_))); \
    }                                                                                        \
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
    RM_NCCL_CHECK(nccl().commGetAsyncError(comm, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress)
      RM_THROW(kComm, fmt::format("nccl {}: {}", what, nccl().getErrorString(state)));
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
      RM_NCCL_CHECK(nccl().commGetAsyncError(comm_, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        RM_THROW(kComm, fmt::format("nccl: {}", nccl().getErrorString(async)));
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
    RM_NCCL_CHECK(nccl().getUniqueId(&id));
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
  RM_NCCL_CHECK(nccl().commInitRankConfig(&state->comm, size, id, rank, &config));
  try {
    settle(state->comm, Clock::now() + timeout, "init");
  } catch (...) {
    nccl().commAbort(state->comm);
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
    if (nccl().commFinalize(state_->comm) == ncclSuccess) {
      ncclResult_t s = ncclInProgress;
      auto deadline = Clock::now() + std::chrono::seconds(10);
      while (nccl().commGetAsyncError(state_->comm, &s) == ncclSuccess && s == ncclInProgress &&
             Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    nccl().commDestroy(state_->comm);
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
  nccl();  // opened by every rank before the rendezvous, so a missing library fails each at once
  return std::unique_ptr<NcclBackend>(
      new NcclBackend(joinComm(store, rank, size, cuda_device, timeout)));
}

std::string NcclBackend::loadLibrary() {
  return loadNcclLibrary();
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
  nccl().commAbort(state_->comm);
}

namespace {

// ------------------------------------------------------------------------------------------------
// One function per op kind, each queueing its NCCL calls on the communication stream.

// One op on its way to the communication stream: the communicator it goes to, the call, its
// element type, count and reduction, and what its completion keeps: the tensors NCCL uses until
// the op has ended, and the host step to run after it (the bitwise reductions').
struct Enqueue {
  NcclBackend::State& s;
  const OpCall& call;
  ncclDataType_t type;
  size_t count;  // the input's elements (0 without one)
  ncclRedOp_t op = ncclSum;
  std::vector<Tensor> keep;
  std::function<void()> finish;
};

// The NCCL reduction of call.reduce (ncclSum for the bitwise kinds, which bitwiseVia reduces on
// the host). PREMUL_SUM's is made for this call and must be destroyed after it.
ncclRedOp_t ncclReduction(const OpCall& call, ncclDataType_t type, ncclComm_t comm) {
  switch (call.reduce) {
    case ReduceKind::kSum:
      return ncclSum;
    case ReduceKind::kAvg:
      return ncclAvg;
    case ReduceKind::kProduct:
      return ncclProd;
    case ReduceKind::kMin:
      return ncclMin;
    case ReduceKind::kMax:
      return ncclMax;
    case ReduceKind::kPremulSum: {
      ncclRedOp_t op = ncclSum;
      const Tensor& in = call.input;
      if (in.dtype() == DType::kF64) {
        double factor = call.premul_factor;
        RM_NCCL_CHECK(
            nccl().redOpCreatePreMulSum(&op, &factor, type, ncclScalarHostImmediate, comm));
      } else {
        // The scalar's type must be the tensor's; bf16 / fp16 scalars are passed as float bits
        // rounded the same way the host path rounds them.
        float factor = static_cast<float>(call.premul_factor);
        uint16_t half = in.dtype() == DType::kBF16 ? floatToBf16(factor) : floatToHalf(factor);
        void* scalar =
            in.dtype() == DType::kF32 ? static_cast<void*>(&factor) : static_cast<void*>(&half);
        RM_NCCL_CHECK(
            nccl().redOpCreatePreMulSum(&op, scalar, type, ncclScalarHostImmediate, comm));
      }
      return op;
    }
    default:
      return ncclSum;
  }
}

bool isBitwise(ReduceKind kind) {
  return kind == ReduceKind::kBand || kind == ReduceKind::kBor || kind == ReduceKind::kBxor;
}

// Bitwise reductions: gather every rank's tensor, reduce on the host, copy back into `target` (on
// every rank, or only on rank `root` when `only_root`).
void bitwiseVia(Enqueue& q, const Tensor& contribution, Tensor target, int root, bool only_root) {
  NcclBackend::State& s = q.s;
  Tensor all =
      Tensor::empty({contribution.numel() * s.size}, contribution.dtype(), Device::cuda(s.device));
  q.keep.push_back(all);
  RM_NCCL_CHECK(nccl().allGather(contribution.raw(), all.raw(),
                                 static_cast<size_t>(contribution.numel()), q.type, s.comm,
                                 s.stream));
  q.finish = [all, target, n = s.size, kind = q.call.reduce, root, only_root,
              rank = s.rank]() mutable {
    if (only_root && rank != root) return;
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
}

void allReduce(Enqueue& q) {
  const Tensor& in = q.call.input;
  if (isBitwise(q.call.reduce)) {
    bitwiseVia(q, in, in, -1, false);
    return;
  }
  RM_NCCL_CHECK(nccl().allReduce(in.raw(), const_cast<void*>(in.raw()), q.count, q.type, q.op,
                                 q.s.comm, q.s.stream));
}

void broadcast(Enqueue& q) {
  const Tensor& in = q.call.input;
  RM_NCCL_CHECK(nccl().broadcast(in.raw(), const_cast<void*>(in.raw()), q.count, q.type,
                                 q.call.peer, q.s.comm, q.s.stream));
}

void reduce(Enqueue& q) {
  const Tensor& in = q.call.input;
  if (isBitwise(q.call.reduce)) {
    bitwiseVia(q, in, in, q.call.peer, true);
    return;
  }
  RM_NCCL_CHECK(nccl().reduce(in.raw(), const_cast<void*>(in.raw()), q.count, q.type, q.op,
                              q.call.peer, q.s.comm, q.s.stream));
}

void allGather(Enqueue& q) {
  RM_NCCL_CHECK(nccl().allGather(q.call.input.raw(), const_cast<void*>(q.call.output.raw()),
                                 q.count, q.type, q.s.comm, q.s.stream));
}

void reduceScatter(Enqueue& q) {
  const Tensor& in = q.call.input;
  Tensor out = q.call.output;
  if (!isBitwise(q.call.reduce)) {
    RM_NCCL_CHECK(nccl().reduceScatter(in.raw(), const_cast<void*>(out.raw()),
                                       static_cast<size_t>(out.numel()), q.type, q.op, q.s.comm,
                                       q.s.stream));
    return;
  }
  // Each rank keeps its block of the full reduction.
  Tensor full = Tensor::empty({in.numel()}, in.dtype(), Device::cuda(q.s.device));
  q.keep.push_back(full);
  bitwiseVia(q, in, full, -1, false);
  auto reduce_all = q.finish;
  q.finish = [reduce_all, full, out, rank = q.s.rank]() mutable {
    reduce_all();
    out.copyFrom(full.narrowRows(rank * out.numel(), out.numel()).view(out.shape()));
  };
}

// The bytes of one element of the op's tensors.
size_t elementBytes(const OpCall& call) {
  return dtypeSize(call.input.defined() ? call.input.dtype() : call.output.dtype());
}

// all_to_all, gather and scatter are grouped sends and receives.
void allToAll(Enqueue& q) {
  NcclBackend::State& s = q.s;
  const size_t elem = elementBytes(q.call);
  const size_t block = q.count / static_cast<size_t>(s.size);
  RM_NCCL_CHECK(nccl().groupStart());
  for (int r = 0; r < s.size; ++r) {
    RM_NCCL_CHECK(nccl().send(static_cast<const uint8_t*>(q.call.input.raw()) + r * block * elem,
                              block, q.type, r, s.comm, s.stream));
    RM_NCCL_CHECK(nccl().recv(
        static_cast<uint8_t*>(const_cast<void*>(q.call.output.raw())) + r * block * elem, block,
        q.type, r, s.comm, s.stream));
  }
  RM_NCCL_CHECK(nccl().groupEnd());
}

void gather(Enqueue& q) {
  NcclBackend::State& s = q.s;
  const size_t elem = elementBytes(q.call);
  const int root = q.call.peer;
  RM_NCCL_CHECK(nccl().groupStart());
  RM_NCCL_CHECK(nccl().send(q.call.input.raw(), q.count, q.type, root, s.comm, s.stream));
  if (s.rank == root) {
    for (int r = 0; r < s.size; ++r) {
      RM_NCCL_CHECK(nccl().recv(
          static_cast<uint8_t*>(const_cast<void*>(q.call.output.raw())) + r * q.count * elem,
          q.count, q.type, r, s.comm, s.stream));
    }
  }
  RM_NCCL_CHECK(nccl().groupEnd());
}

void scatter(Enqueue& q) {
  NcclBackend::State& s = q.s;
  const size_t elem = elementBytes(q.call);
  const int root = q.call.peer;
  const size_t block = static_cast<size_t>(q.call.output.numel());
  RM_NCCL_CHECK(nccl().groupStart());
  if (s.rank == root) {
    for (int r = 0; r < s.size; ++r) {
      RM_NCCL_CHECK(nccl().send(static_cast<const uint8_t*>(q.call.input.raw()) + r * block * elem,
                                block, q.type, r, s.comm, s.stream));
    }
  }
  RM_NCCL_CHECK(
      nccl().recv(const_cast<void*>(q.call.output.raw()), block, q.type, root, s.comm, s.stream));
  RM_NCCL_CHECK(nccl().groupEnd());
}

// An all-reduce of one byte, as ProcessGroupNCCL's barrier.
void barrier(Enqueue& q) {
  Tensor one = Tensor::zeros({1}, DType::kU8, Device::cuda(q.s.device));
  q.keep.push_back(one);
  RM_NCCL_CHECK(
      nccl().allReduce(one.raw(), one.raw(), 1, ncclUint8, ncclSum, q.s.comm, q.s.stream));
}

void send(Enqueue& q) {
  RM_NCCL_CHECK(
      nccl().send(q.call.input.raw(), q.count, q.type, q.call.peer, q.s.comm, q.s.stream));
}

void recv(Enqueue& q) {
  RM_NCCL_CHECK(nccl().recv(const_cast<void*>(q.call.input.raw()), q.count, q.type, q.call.peer,
                            q.s.comm, q.s.stream));
}

// Creates the events that time an op on the communication stream and records `start`, once that
// stream waits for what the compute stream queued before this call.
void startTiming(cudaStream_t stream, cudaEvent_t& start, cudaEvent_t& end) {
  cudaEvent_t ready;
  RM_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  RM_NCCL_CUDA_CHECK(cudaEventCreate(&start));
  RM_NCCL_CUDA_CHECK(cudaEventCreate(&end));
  RM_NCCL_CUDA_CHECK(cudaEventRecord(ready, nullptr));
  RM_NCCL_CUDA_CHECK(cudaStreamWaitEvent(stream, ready, 0));
  cudaEventDestroy(ready);
  RM_NCCL_CUDA_CHECK(cudaEventRecord(start, stream));
}

}  // namespace

// Queues the op on the communication stream between two timing events and returns without waiting
// for it (NcclOp waits); the communicator has settled (left ncclInProgress) by then.
std::unique_ptr<PendingOp> NcclBackend::launch(const OpCall& call) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->aborted) RM_THROW(kComm, "nccl: the communicator was aborted");
  State& s = *state_;
  RM_NCCL_CUDA_CHECK(cudaSetDevice(s.device));
  cudaEvent_t start, end;
  startTiming(s.stream, start, end);

  const Tensor& in = call.input;
  Enqueue q{.s = s,
            .call = call,
            .type = ncclType(in.defined() ? in.dtype() : call.output.dtype()),
            .count = in.defined() ? static_cast<size_t>(in.numel()) : 0,
            .keep = {in, call.output}};
  const auto deadline = Clock::now() + call.timeout;
  q.op = ncclReduction(call, q.type, s.comm);
  switch (call.op) {
    case CommOp::kAllReduce:
      allReduce(q);
      break;
    case CommOp::kBroadcast:
      broadcast(q);
      break;
    case CommOp::kReduce:
      reduce(q);
      break;
    case CommOp::kAllGather:
      allGather(q);
      break;
    case CommOp::kReduceScatter:
      reduceScatter(q);
      break;
    case CommOp::kAllToAll:
      allToAll(q);
      break;
    case CommOp::kGather:
      gather(q);
      break;
    case CommOp::kScatter:
      scatter(q);
      break;
    case CommOp::kBarrier:
      barrier(q);
      break;
    case CommOp::kSend:
      send(q);
      break;
    case CommOp::kRecv:
      recv(q);
      break;
  }
  settle(s.comm, deadline, toString(call.op).data());
  if (call.reduce == ReduceKind::kPremulSum) nccl().redOpDestroy(q.op, s.comm);
  RM_NCCL_CUDA_CHECK(cudaEventRecord(end, s.stream));
  return std::make_unique<NcclOp>(s.comm, s.device, start, end, std::move(q.keep),
                                  std::move(q.finish));
}

}  // namespace ringmaster
