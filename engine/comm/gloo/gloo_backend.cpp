// Gloo backend: each op maps to Gloo's new-style collectives with our reduce kernels.
#include "comm/gloo/gloo_backend.h"

#include <sys/socket.h>

#include <csignal>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/pair.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "core/error.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint8_t kP2PSlotPrefix = 0x70;
constexpr uint8_t kP2PHeaderSlotPrefix = 0x72;  // a large message's launch time
constexpr uint8_t kReduceScatterSlotPrefix = 0x71;

// Gloo's TCP pair keeps its socket protected. A pair closed by its own side never wakes the
// operations waiting on it (they sleep until their timeout); a pair whose socket is shut down
// sees the end of stream on its event loop and fails them at once, as a peer's close does.
struct TcpPairSocket : gloo::transport::tcp::Pair {
  static void shutDown(gloo::transport::tcp::Pair& pair) {
    std::lock_guard<std::mutex> lock(pair.*(&TcpPairSocket::m_));
    int fd = pair.*(&TcpPairSocket::fd_);
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
};

// Gloo's rendezvous speaks to our store through this adapter.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit StoreAdapter(std::shared_ptr<ringmaster::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    Bytes value = store_->get(key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<ringmaster::Store> store_;
};

// Calls f with a value of the unsigned type as wide as one element (Gloo's templates only use
// the type's size when every reduction goes through our own function).
template <typename F>
void withElementType(size_t element_size, F&& f) {
  switch (element_size) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
  }
  RM_ENFORCE(false, fmt::format("no element type of {} bytes", element_size));
}

// Gloo's reduce signature: c = a (op) b, where c may alias a or b.
gloo::AllreduceOptions::Func reduceFunction(ReduceKind kind, DType dtype) {
  return [kind, dtype](void* c, const void* a, const void* b, size_t n) {
    const void* other = b;
    if (c == b) {
      other = a;
    } else if (c != a) {
      std::memcpy(c, a, n * dtypeSize(dtype));
    }
    reduceInto(kind, dtype, c, other, n);
  };
}

// Runs a Gloo call, turning its exceptions into ours.
template <typename F>
void guarded(const char* what, F&& f) {
  try {
    f();
  } catch (const gloo::IoException& e) {
    std::string message = e.what();
    bool timeout = message.find("Timed out") != std::string::npos ||
                   message.find("timed out") != std::string::npos;
    throw Error(timeout ? ErrorKind::kTimeout : ErrorKind::kComm,
                fmt::format("gloo {}: {}", what, message), __FILE__, __LINE__);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kComm, fmt::format("gloo {}: {}", what, e.what()), __FILE__, __LINE__);
  }
}

class DoneOp : public PendingOp {
 public:
  void wait(Clock::time_point) override {}
};

// Connects every pair, then waits until every rank has: Gloo's full mesh returns on a rank whose
// pairs are up while a peer may still be reading the last handshake, and a rank that failed at
// once would otherwise break that peer's rendezvous instead of its first operation.
void connectEveryRank(gloo::rendezvous::Context& context, std::shared_ptr<ringmaster::Store> store,
                      std::shared_ptr<gloo::transport::Device>& device,
                      std::chrono::milliseconds timeout) {
  StoreAdapter adapter(store);
  guarded("rendezvous", [&] { context.connectFullMesh(adapter, device); });
  store->set(fmt::format("connected/{}", context.rank), Bytes{1});
  std::vector<std::string> everyone;
  for (int r = 0; r < context.size; ++r) everyone.push_back(fmt::format("connected/{}", r));
  guarded("rendezvous", [&] { store->wait(everyone, timeout); });
}

}  // namespace

// A send or receive in flight. Every message tells its receiver when its sender launched it (int64
// microseconds on the clock aligned to rank 0's), so a receive can tell the time it waited for its
// sender from the transfer. A small message carries that time in front of its bytes, staged in a
// buffer of its own (a copy costs less than a message); a large one sends it as a message of its
// own just before, on a slot of its own, and moves the tensor's bytes in place.
class GlooBackend::P2POp : public PendingOp {
 public:
  static constexpr size_t kStagedLimit = size_t{16} << 10;

  P2POp(GlooBackend* backend, const OpCall& call, gloo::Context& context)
      : backend_(backend),
        is_send_(call.op == CommOp::kSend),
        tensor_(call.input),
        staged_(call.input.nbytes() <= kStagedLimit),
        launched_us_(call.launched_us) {
    const size_t bytes = tensor_.nbytes();
    guarded(what(), [&] {
      if (staged_) {
        staging_.reset(new uint8_t[kHeaderBytes + bytes]);
        if (is_send_) {
          std::memcpy(staging_.get(), &launched_us_, kHeaderBytes);
          std::memcpy(staging_.get() + kHeaderBytes, tensor_.raw(), bytes);
        }
        data_ = context.createUnboundBuffer(staging_.get(), kHeaderBytes + bytes);
      } else {
        header_value_ = launched_us_;
        header_ = context.createUnboundBuffer(&header_value_, kHeaderBytes);
        data_ = context.createUnboundBuffer(tensor_.raw(), bytes);
      }
      const uint32_t tag = static_cast<uint32_t>(call.tag);
      for (auto [buffer, prefix] : {std::pair{header_.get(), kP2PHeaderSlotPrefix},
                                    std::pair{data_.get(), kP2PSlotPrefix}}) {
        if (buffer == nullptr) continue;
        if (is_send_)
          buffer->send(call.peer, gloo::Slot::build(prefix, tag));
        else
          buffer->recv(call.peer, gloo::Slot::build(prefix, tag));
        backend_->track(buffer, true);
      }
    });
  }
  ~P2POp() override {
    if (header_) backend_->track(header_.get(), false);
    if (data_) backend_->track(data_.get(), false);
  }

  void wait(Clock::time_point deadline) override {
    for (auto* buffer : {header_.get(), data_.get()}) {
      if (buffer == nullptr) continue;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) left = std::chrono::milliseconds(1);
      bool completed = false;
      guarded(what(),
              [&] { completed = is_send_ ? buffer->waitSend(left) : buffer->waitRecv(left); });
      if (!completed) RM_THROW(kComm, fmt::format("gloo {}: aborted", what()));
    }
    if (is_send_) return;
    if (staged_) {
      std::memcpy(&peer_launched_us_, staging_.get(), kHeaderBytes);
      std::memcpy(tensor_.raw(), staging_.get() + kHeaderBytes, tensor_.nbytes());
    } else {
      peer_launched_us_ = header_value_;
    }
    received_ = true;
  }

  // A receive waited for its sender from its own launch until the sender launched: the transfer
  // cannot begin before both have. A send cannot tell (its receiver's launch time does not reach
  // it); Ringmaster's pipeline posts every receive before the step's first send.
  std::optional<double> waitMs() const override {
    if (!received_) return std::nullopt;
    return static_cast<double>(std::max<int64_t>(0, peer_launched_us_ - launched_us_)) / 1000.0;
  }

 private:
  static constexpr size_t kHeaderBytes = sizeof(int64_t);
  const char* what() const { return is_send_ ? "send" : "recv"; }

  GlooBackend* backend_;
  bool is_send_;
  Tensor tensor_;  // stays alive while the transport may touch it; a receive's bytes land in it
  bool staged_;
  int64_t launched_us_;
  std::unique_ptr<uint8_t[]> staging_;  // staged: the header, then the tensor's bytes
  int64_t header_value_ = 0;            // large: the header's own buffer
  std::unique_ptr<gloo::transport::UnboundBuffer> header_, data_;
  bool received_ = false;  // set by wait(), read after it by the same thread
  int64_t peer_launched_us_ = 0;
};

// Gloo's TCP transport writes with writev, which cannot pass MSG_NOSIGNAL: a write to a peer that
// just died raises SIGPIPE, whose default action would kill this rank before it could report the
// failure. A process that left SIGPIPE at its default gets it ignored (as Python does for
// torch.distributed), so the write fails with EPIPE and the failure is named like any other; a
// handler the program installed itself is left alone.
namespace {
void ignoreSigpipeUnlessHandled() {
  struct sigaction current = {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    std::signal(SIGPIPE, SIG_IGN);
}
}  // namespace

GlooBackend::GlooBackend(std::shared_ptr<gloo::transport::Device> device,
                         std::shared_ptr<gloo::Context> context, GlooOptions options)
    : device_(std::move(device)), context_(std::move(context)), options_(std::move(options)) {}

GlooBackend::~GlooBackend() = default;

std::unique_ptr<GlooBackend> GlooBackend::connect(std::shared_ptr<Store> store, int rank, int size,
                                                  const GlooOptions& options) {
  ignoreSigpipeUnlessHandled();
  std::shared_ptr<gloo::transport::Device> device;
  gloo::transport::tcp::attr attr;
  if (!options.interface.empty())
    attr.iface = options.interface;
  else
    attr.hostname = options.hostname;
  guarded("device", [&] { device = gloo::transport::tcp::CreateDevice(attr); });
  if (size == 1) {
    return std::unique_ptr<GlooBackend>(
        new GlooBackend(std::move(device), std::make_shared<gloo::Context>(0, 1), options));
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(options.timeout);
  connectEveryRank(*context, std::move(store), device, options.timeout);
  return std::unique_ptr<GlooBackend>(
      new GlooBackend(std::move(device), std::move(context), options));
}

std::unique_ptr<Backend> GlooBackend::split(std::shared_ptr<Store> store, int group_rank,
                                            int group_size) {
  if (group_size == 1) {
    auto context = std::make_shared<gloo::Context>(0, 1);
    return std::unique_ptr<GlooBackend>(new GlooBackend(device_, std::move(context), options_));
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(group_rank, group_size);
  context->setTimeout(options_.timeout);
  connectEveryRank(*context, std::move(store), device_, options_.timeout);
  return std::unique_ptr<GlooBackend>(new GlooBackend(device_, std::move(context), options_));
}

bool GlooBackend::allreduceUsesRing(size_t bytes) {
  // Below 4 MiB the ring's 2(n-1) dependent steps cost more than its bandwidth saves: BCUBE's
  // log-depth exchange was up to ten times faster at 64 KiB with 4 ranks on 2 cores, and the ring
  // won from 4 MiB on (docs/comm.md).
  return bytes >= (size_t{4} << 20);
}

size_t GlooBackend::allreduceSegmentBytes(size_t bytes, int ranks, size_t configured) {
  if (configured > 0) return configured;
  // Gloo's default (1 MiB) pays a per-segment round trip; large buffers do best with each rank's
  // chunk moved in a few large messages (docs/comm.md).
  size_t per_rank = bytes / static_cast<size_t>(std::max(ranks, 1));
  return std::max<size_t>(size_t{1} << 20, per_rank / 4);
}

void GlooBackend::track(gloo::transport::UnboundBuffer* buffer, bool add) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (add)
    p2p_in_flight_.insert(buffer);
  else
    p2p_in_flight_.erase(buffer);
}

void GlooBackend::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) return;
  aborted_ = true;
  for (auto* buffer : p2p_in_flight_) {
    buffer->abortWaitSend();
    buffer->abortWaitRecv();
  }
  // Shutting every connection down fails the Gloo operation in flight, here and on the peers, at
  // once instead of at its timeout; Gloo's event loop then closes the pairs.
  for (int peer = 0; peer < context_->size; ++peer) {
    if (peer == context_->rank) continue;
    auto* pair = dynamic_cast<gloo::transport::tcp::Pair*>(context_->getPair(peer).get());
    if (pair != nullptr) TcpPairSocket::shutDown(*pair);
  }
}

namespace {

// ------------------------------------------------------------------------------------------------
// One function per collective: Gloo's options for it, filled from the call, then Gloo's call. Each
// has finished the op when it returns.

// A tensor's storage as the elements Gloo's templates take, and how many.
template <typename T>
T* elements(const Tensor& tensor) {
  return static_cast<T*>(const_cast<void*>(tensor.raw()));
}
size_t elementCount(const Tensor& tensor) {
  return static_cast<size_t>(tensor.numel());
}

// What every collective sets alike: tag 0 (a context runs one collective at a time) and the
// call's timeout.
template <typename Options>
void setTagAndTimeout(Options& options, const OpCall& call) {
  options.setTag(0);
  options.setTimeout(call.timeout);
}

using GlooContext = std::shared_ptr<gloo::Context>;

void allReduce(const GlooContext& context, const OpCall& call, size_t configured_segment_bytes) {
  const Tensor& in = call.input;
  withElementType(dtypeSize(in.dtype()), [&](auto type) {
    using T = decltype(type);
    gloo::AllreduceOptions opts(context);
    opts.setOutput(elements<T>(in), elementCount(in));
    opts.setReduceFunction(reduceFunction(call.reduce, in.dtype()));
    opts.setAlgorithm(GlooBackend::allreduceUsesRing(in.nbytes())
                          ? gloo::AllreduceOptions::Algorithm::RING
                          : gloo::AllreduceOptions::Algorithm::BCUBE);
    opts.setMaxSegmentSize(
        GlooBackend::allreduceSegmentBytes(in.nbytes(), context->size, configured_segment_bytes));
    setTagAndTimeout(opts, call);
    gloo::allreduce(opts);
  });
}

void broadcast(const GlooContext& context, const OpCall& call) {
  const Tensor& in = call.input;
  withElementType(dtypeSize(in.dtype()), [&](auto type) {
    using T = decltype(type);
    gloo::BroadcastOptions opts(context);
    opts.setOutput(elements<T>(in), elementCount(in));
    opts.setRoot(call.peer);
    setTagAndTimeout(opts, call);
    gloo::broadcast(opts);
  });
}

void reduce(const GlooContext& context, const OpCall& call) {
  const Tensor& in = call.input;
  withElementType(dtypeSize(in.dtype()), [&](auto type) {
    using T = decltype(type);
    gloo::ReduceOptions opts(context);
    opts.setOutput(elements<T>(in), elementCount(in));
    opts.setRoot(call.peer);
    opts.setReduceFunction(reduceFunction(call.reduce, in.dtype()));
    setTagAndTimeout(opts, call);
    gloo::reduce(opts);
  });
}

void allGather(const GlooContext& context, const OpCall& call) {
  withElementType(dtypeSize(call.input.dtype()), [&](auto type) {
    using T = decltype(type);
    gloo::AllgatherOptions opts(context);
    opts.setInput(elements<T>(call.input), elementCount(call.input));
    opts.setOutput(elements<T>(call.output), elementCount(call.output));
    setTagAndTimeout(opts, call);
    gloo::allgather(opts);
  });
}

void allToAll(const GlooContext& context, const OpCall& call) {
  withElementType(dtypeSize(call.input.dtype()), [&](auto type) {
    using T = decltype(type);
    gloo::AlltoallOptions opts(context);
    opts.setInput(elements<T>(call.input), elementCount(call.input));
    opts.setOutput(elements<T>(call.output), elementCount(call.output));
    setTagAndTimeout(opts, call);
    gloo::alltoall(opts);
  });
}

// The root (call.peer) receives every rank's input, in rank order, into its output.
void gather(const GlooContext& context, const OpCall& call) {
  withElementType(dtypeSize(call.input.dtype()), [&](auto type) {
    using T = decltype(type);
    gloo::GatherOptions opts(context);
    opts.setInput(elements<T>(call.input), elementCount(call.input));
    if (context->rank == call.peer)
      opts.setOutput(elements<T>(call.output), elementCount(call.output));
    opts.setRoot(call.peer);
    setTagAndTimeout(opts, call);
    gloo::gather(opts);
  });
}

// The root (call.peer) sends block r of its input to rank r's output.
void scatter(const GlooContext& context, const OpCall& call) {
  const Tensor& out = call.output;
  withElementType(dtypeSize(out.dtype()), [&](auto type) {
    using T = decltype(type);
    gloo::ScatterOptions opts(context);
    std::vector<T*> blocks;
    if (context->rank == call.peer) {
      T* base = elements<T>(call.input);
      for (int r = 0; r < context->size; ++r) blocks.push_back(base + r * out.numel());
      opts.setInputs(blocks, elementCount(out));
    }
    opts.setOutput(elements<T>(out), elementCount(out));
    opts.setRoot(call.peer);
    setTagAndTimeout(opts, call);
    gloo::scatter(opts);
  });
}

void barrier(const GlooContext& context, const OpCall& call) {
  gloo::BarrierOptions opts(context);
  setTagAndTimeout(opts, call);
  gloo::barrier(opts);
}

}  // namespace

// Collectives run to the end here, on the calling thread (a DoneOp); send and receive return a
// P2POp to wait on. An op with no elements does nothing.
std::unique_ptr<PendingOp> GlooBackend::launch(const OpCall& call) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_) RM_THROW(kComm, "gloo: the communicator was aborted");
  }
  const bool has_input = call.input.numel() > 0, has_output = call.output.numel() > 0;
  switch (call.op) {
    case CommOp::kAllReduce:
      if (has_input) {
        guarded("all_reduce", [&] { allReduce(context_, call, options_.allreduce_segment_bytes); });
      }
      break;
    case CommOp::kBroadcast:
      if (has_input) guarded("broadcast", [&] { broadcast(context_, call); });
      break;
    case CommOp::kReduce:
      if (has_input) guarded("reduce", [&] { reduce(context_, call); });
      break;
    case CommOp::kAllGather:
      if (has_input) guarded("all_gather", [&] { allGather(context_, call); });
      break;
    case CommOp::kReduceScatter:
      if (has_output) guarded("reduce_scatter", [&] { reduceScatterRing(call); });
      break;
    case CommOp::kAllToAll:
      if (has_input) guarded("all_to_all", [&] { allToAll(context_, call); });
      break;
    case CommOp::kGather:
      if (has_input) guarded("gather", [&] { gather(context_, call); });
      break;
    case CommOp::kScatter:
      if (has_output) guarded("scatter", [&] { scatter(context_, call); });
      break;
    case CommOp::kBarrier:
      guarded("barrier", [&] { barrier(context_, call); });
      break;
    case CommOp::kSend:
    case CommOp::kRecv:
      if (call.input.nbytes() == 0) break;
      return std::make_unique<P2POp>(this, call, *context_);
  }
  return std::make_unique<DoneOp>();
}

// Ring reduce-scatter: n - 1 steps; at step s rank r sends its partial block (r - s - 1) to the
// right neighbour and folds the block (r - s - 2) arriving from the left into its own partial
// sums. After the last step rank r holds the full reduction of block r. Each rank moves
// (n - 1) / n of the input, the bus factor nccl-tests assumes.
void GlooBackend::reduceScatterRing(const OpCall& call) {
  const int n = context_->size;
  const int r = context_->rank;
  const size_t block_elems = static_cast<size_t>(call.output.numel());
  const size_t elem = dtypeSize(call.output.dtype());
  const size_t block_bytes = block_elems * elem;
  Tensor acc = call.input.clone();  // partial sums, n blocks
  Tensor incoming = Tensor::empty({static_cast<int64_t>(block_elems)}, call.output.dtype());
  auto* acc_bytes = static_cast<uint8_t*>(acc.raw());
  auto send_buf = context_->createUnboundBuffer(acc_bytes, acc.nbytes());
  auto recv_buf = context_->createUnboundBuffer(incoming.raw(), block_bytes);
  const int right = (r + 1) % n;
  const int left = (r - 1 + n) % n;
  auto deadline = Clock::now() + call.timeout;
  auto left_ms = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max(ms, std::chrono::milliseconds(1));
  };
  for (int s = 0; s < n - 1; ++s) {
    const int send_block = ((r - s - 1) % n + n) % n;
    const int recv_block = ((r - s - 2) % n + n) % n;
    auto slot = gloo::Slot::build(kReduceScatterSlotPrefix, static_cast<uint32_t>(s));
    recv_buf->recv(left, slot, 0, block_bytes);
    send_buf->send(right, slot, static_cast<size_t>(send_block) * block_bytes, block_bytes);
    if (!recv_buf->waitRecv(left_ms())) RM_THROW(kComm, "gloo reduce_scatter: aborted");
    if (!send_buf->waitSend(left_ms())) RM_THROW(kComm, "gloo reduce_scatter: aborted");
    reduceInto(call.reduce, call.output.dtype(),
               acc_bytes + static_cast<size_t>(recv_block) * block_bytes, incoming.raw(),
               block_elems);
  }
  Tensor output = call.output;
  std::memcpy(output.raw(), acc_bytes + static_cast<size_t>(r) * block_bytes, block_bytes);
}

}  // namespace ringmaster
