// Shared-memory backend: every collective as rounds over the ranks' staging slots, send / recv over
// the per-pair mailbox rings, and the checks a blocked rank makes (abort, deadline, peers alive).
#include "comm/shm/shm_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "comm/shm/shm_segment.h"
#include "core/error.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

class DoneOp : public PendingOp {
 public:
  void wait(Clock::time_point) override {}
};

std::string firstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What tells this host from another, and one PID namespace from another (the peers' liveness is
// read through their PIDs): the kernel's boot id, the host name, the PID namespace.
std::string hostIdentity() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  char pid_ns[128] = {};
  if (::readlink("/proc/self/ns/pid", pid_ns, sizeof pid_ns - 1) < 0) pid_ns[0] = '\0';
  return fmt::format("{}|{}|{}", firstLine("/proc/sys/kernel/random/boot_id"), host, pid_ns);
}

// A send's header on the ring, in front of its bytes.
struct MessageHeader {
  int32_t tag = 0;
  uint32_t reserved = 0;
  uint64_t bytes = 0;
  int64_t launched_us = 0;
};

uint8_t* bytesOf(const Tensor& t) {
  return static_cast<uint8_t*>(const_cast<void*>(t.raw()));
}

// Reduces `count` elements of the `ranks` sources into `out` in rank order (so every rank that
// reduces the same sources gets the same bits).
void reduceInRankOrder(const OpCall& call, uint8_t* out, const std::vector<const uint8_t*>& sources,
                       size_t count) {
  const DType dtype = call.input.defined() ? call.input.dtype() : call.output.dtype();
  std::memcpy(out, sources[0], count * dtypeSize(dtype));
  for (size_t r = 1; r < sources.size(); ++r)
    reduceInto(call.reduce, dtype, out, sources[r], count);
}

}  // namespace

// What a blocked rank checks between sleeps; each failure names the operation.
struct ShmBackend::Wait {
  ShmBackend* backend;
  const char* what;
  Clock::time_point deadline;
  std::chrono::milliseconds timeout;
  // send / recv: only their peer's life matters (the other ranks may be done and gone); a
  // collective needs every rank.
  int only_peer = -1;

  // `progress_target`: in a collective, the progress every rank must reach for this wait to end.
  // A rank already past it may be gone: a reduce's or gather's other ranks finish before the root
  // and may leave while it still waits for a slow one.
  void check(int peer, std::optional<uint32_t> progress_target = std::nullopt) const {
    if (backend->aborted_.load())
      RM_THROW(kComm, fmt::format("shm {}: the communicator was aborted", what));
    if (uint32_t by = backend->segment_->abortedBy().load(); by != 0)
      RM_THROW(kComm, fmt::format("shm {}: rank {} aborted the group", what, by - 1));
    for (int r = 0; r < backend->size_; ++r) {
      if (r == backend->rank_ || (only_peer >= 0 && r != only_peer)) continue;
      if (progress_target &&
          shmReached(backend->segment_->rank(r).progress.value.load(), *progress_target))
        continue;
      if (backend->segment_->rankExited(r)) {
        RM_THROW(kComm, fmt::format("shm {}: rank {} (pid {}) exited", what, r,
                                    backend->segment_->rank(r).pid));
      }
      if (backend->segment_->rank(r).departed.load() != 0)
        RM_THROW(kComm, fmt::format("shm {}: rank {} left the group", what, r));
    }
    if (Clock::now() >= deadline) {
      RM_THROW(kTimeout, fmt::format("shm {}: timed out after {} ms waiting for rank {}", what,
                                     timeout.count(), peer));
    }
  }
};

// A send or receive: it runs on the communicator's lane for its peer and direction, in wait().
class ShmBackend::P2POp : public PendingOp {
 public:
  P2POp(ShmBackend* backend, const OpCall& call) : backend_(backend), call_(call) {}

  void wait(Clock::time_point deadline) override {
    const bool send = call_.op == CommOp::kSend;
    Wait wait{backend_, send ? "send" : "recv", deadline, call_.timeout, call_.peer};
    if (send) {
      backend_->sendMessage(call_, wait);
    } else {
      peer_launched_us_ = backend_->receiveMessage(call_, wait);
      received_ = true;
    }
  }
  // A receive waited for its sender from its own launch until the sender's (as Gloo's).
  std::optional<double> waitMs() const override {
    if (!received_) return std::nullopt;
    return static_cast<double>(std::max<int64_t>(0, peer_launched_us_ - call_.launched_us)) /
           1000.0;
  }

 private:
  ShmBackend* backend_;
  OpCall call_;  // holds the tensor alive while the op runs
  bool received_ = false;
  int64_t peer_launched_us_ = 0;
};

// ------------------------------------------------------------------------------------------------
// Set-up.

bool ShmBackend::everyRankOnThisHost(Store& store, int rank, int size,
                                     std::chrono::milliseconds timeout) {
  store.set(fmt::format("shm/host/{}", rank), toBytes(hostIdentity()));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("shm/host/{}", r));
  store.wait(keys, timeout);
  const Bytes mine = store.get(keys[static_cast<size_t>(rank)]);
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& key) { return store.get(key) == mine; });
}

std::unique_ptr<ShmBackend> ShmBackend::connect(std::shared_ptr<Store> store, int rank, int size,
                                                const ShmOptions& options) {
  if (size == 1) return std::unique_ptr<ShmBackend>(new ShmBackend(nullptr, 0, 1, options));
  RM_CHECK_ARG((options.ring_bytes & (options.ring_bytes - 1)) == 0 && options.ring_bytes >= 64 &&
                   options.slot_bytes >= 2 * 64 * static_cast<size_t>(size),
               "shm: the ring must be a power of two and each slot half hold a line per rank");
  ShmLayout layout{size, options.slot_bytes, options.ring_bytes};
  auto segment = ShmSegment::rendezvous(*store, rank, layout, options.timeout);
  if (!segment) return nullptr;
  return std::unique_ptr<ShmBackend>(new ShmBackend(std::move(segment), rank, size, options));
}

ShmBackend::ShmBackend(std::unique_ptr<ShmSegment> segment, int rank, int size, ShmOptions options)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(size),
      options_(options),
      most_spins_(options.spins > 0 ? options.spins : shmSpinsFor(size)),
      collective_spins_(most_spins_) {
  for (int r = 0; r < size_; ++r) {
    inboxes_.push_back(std::make_unique<Inbox>(most_spins_));
    outboxes_.push_back(std::make_unique<Outbox>(most_spins_));
  }
}

ShmBackend::~ShmBackend() {
  if (segment_) segment_->rank(rank_).departed.store(1);
}

std::unique_ptr<Backend> ShmBackend::split(std::shared_ptr<Store> store, int group_rank,
                                           int group_size) {
  auto backend = connect(std::move(store), group_rank, group_size, options_);
  if (!backend) RM_THROW(kComm, "shm: a rank could not map the sub-group's segment");
  return backend;
}

void ShmBackend::abort() {
  if (aborted_.exchange(true) || !segment_) return;
  uint32_t none = 0;
  segment_->abortedBy().compare_exchange_strong(none, static_cast<uint32_t>(rank_ + 1));
  // Wake every sleeper on the segment, here and in the peers: they see the abort and fail.
  for (int r = 0; r < size_; ++r) {
    shmWakeAll(segment_->rank(r).progress);
    for (int q = 0; q < size_; ++q) {
      shmWakeAll(segment_->ringControl(r, q).head);
      shmWakeAll(segment_->ringControl(r, q).tail);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Dispatch. Collectives run to the end here, on the op thread or a caller's; send and receive
// return a P2POp.
// An op with no elements does nothing (as over Gloo).

std::unique_ptr<PendingOp> ShmBackend::launch(const OpCall& call) {
  if (aborted_.load() || (segment_ && segment_->abortedBy().load() != 0))
    RM_THROW(kComm, "shm: the communicator was aborted");
  if (call.op == CommOp::kSend || call.op == CommOp::kRecv) {
    if (call.input.nbytes() == 0) return std::make_unique<DoneOp>();
    return std::make_unique<P2POp>(this, call);
  }
  runCollective(call);
  return std::make_unique<DoneOp>();
}

void ShmBackend::runCollective(const OpCall& call) {
  const bool has_input = call.input.numel() > 0, has_output = call.output.numel() > 0;
  if (size_ == 1) {  // the communicator short-cuts one-rank groups; a copy where one is asked
    if (has_input && has_output && call.input.nbytes() == call.output.nbytes())
      std::memcpy(bytesOf(call.output), call.input.raw(), call.input.nbytes());
    return;
  }
  const auto timeout = call.timeout.count() > 0 ? call.timeout : options_.timeout;
  Wait wait{this, toString(call.op).data(), Clock::now() + timeout, timeout};
  switch (call.op) {
    case CommOp::kAllReduce:
      if (has_input) allReduce(call, wait);
      break;
    case CommOp::kBroadcast:
      if (has_input) broadcast(call, wait);
      break;
    case CommOp::kReduce:
      if (has_input) reduce(call, wait);
      break;
    case CommOp::kAllGather:
      if (has_input) allGather(call, wait, false);
      break;
    case CommOp::kGather:
      if (has_input) allGather(call, wait, true);
      break;
    case CommOp::kReduceScatter:
    case CommOp::kScatter:
      if (has_output) blockExchange(call, wait);
      break;
    case CommOp::kAllToAll:
      if (has_input) blockExchange(call, wait);
      break;
    case CommOp::kBarrier:
      barrier(wait);
      break;
    case CommOp::kSend:
    case CommOp::kRecv:
      break;
  }
}

// ------------------------------------------------------------------------------------------------
// Rounds.

void ShmBackend::publish() {
  ++progress_;
  shmPublish(segment_->rank(rank_).progress, progress_);
}

void ShmBackend::waitFor(int peer, uint32_t target, Wait& wait) {
  shmWaitFor(segment_->rank(peer).progress, target, collective_spins_,
             [&] { wait.check(peer, target); });
}

void ShmBackend::waitForAll(uint32_t target, Wait& wait) {
  for (int r = 0; r < size_; ++r)
    if (r != rank_) waitFor(r, target, wait);
}

int ShmBackend::beginRound(bool writes, Wait& wait) {
  const int half = static_cast<int>(rounds_++ & 1);
  if (writes) waitForAll(released_[half], wait);
  return half;
}

void ShmBackend::endRound(int half) {
  publish();
  released_[half] = progress_;
}

// A rank's part of a slot half when it holds one block per rank: whole cache lines (and so whole
// elements of any type).
size_t ShmBackend::subBlockBytes(size_t) const {
  return (segment_->halfBytes() / static_cast<size_t>(size_)) & ~size_t{63};
}

void ShmBackend::barrier(Wait& wait) {
  publish();
  waitForAll(progress_, wait);
}

// ------------------------------------------------------------------------------------------------
// Collectives.

void ShmBackend::allReduce(const OpCall& call, Wait& wait) {
  if (call.input.nbytes() <= std::min(options_.small_allreduce_bytes, segment_->halfBytes()))
    allReduceSmall(call, wait);
  else
    allReduceLarge(call, wait);
}

// One round: every rank stages its input, then reduces every rank's, in rank order.
void ShmBackend::allReduceSmall(const OpCall& call, Wait& wait) {
  const int half = beginRound(true, wait);
  std::memcpy(segment_->slotHalf(rank_, half), call.input.raw(), call.input.nbytes());
  publish();
  waitForAll(progress_, wait);
  std::vector<const uint8_t*> sources;
  for (int r = 0; r < size_; ++r) sources.push_back(segment_->slotHalf(r, half));
  reduceInRankOrder(call, bytesOf(call.input), sources, static_cast<size_t>(call.input.numel()));
  endRound(half);
}

// Per chunk of a slot half: every rank stages its chunk; rank s reduces share s of the chunk from
// every slot (in rank order) and stages the result in its own slot; every rank copies the others'.
void ShmBackend::allReduceLarge(const OpCall& call, Wait& wait) {
  const size_t elem = dtypeSize(call.input.dtype());
  const size_t total = static_cast<size_t>(call.input.numel());
  const size_t chunk = segment_->halfBytes() / elem;
  uint8_t* data = bytesOf(call.input);
  const auto n_ranks = static_cast<size_t>(size_);
  auto share_begin = [&](size_t n, size_t r) { return n * r / n_ranks; };
  for (size_t off = 0; off < total; off += chunk) {
    const size_t n = std::min(chunk, total - off);
    const int half = beginRound(true, wait);
    uint8_t* mine = segment_->slotHalf(rank_, half);
    std::memcpy(mine, data + off * elem, n * elem);
    publish();
    waitForAll(progress_, wait);
    const size_t begin = share_begin(n, static_cast<size_t>(rank_));
    const size_t count = share_begin(n, static_cast<size_t>(rank_) + 1) - begin;
    if (count > 0) {
      std::vector<const uint8_t*> sources;
      for (int r = 0; r < size_; ++r) sources.push_back(segment_->slotHalf(r, half) + begin * elem);
      uint8_t* out = data + (off + begin) * elem;
      reduceInRankOrder(call, out, sources, count);
      std::memcpy(mine + begin * elem, out, count * elem);
    }
    publish();
    waitForAll(progress_, wait);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const size_t b = share_begin(n, static_cast<size_t>(r));
      const size_t e = share_begin(n, static_cast<size_t>(r) + 1);
      std::memcpy(data + (off + b) * elem, segment_->slotHalf(r, half) + b * elem, (e - b) * elem);
    }
    endRound(half);
  }
}

void ShmBackend::broadcast(const OpCall& call, Wait& wait) {
  const int root = call.peer;
  const size_t bytes = call.input.nbytes(), chunk = segment_->halfBytes();
  uint8_t* data = bytesOf(call.input);
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t len = std::min(chunk, bytes - off);
    const int half = beginRound(rank_ == root, wait);
    if (rank_ == root) std::memcpy(segment_->slotHalf(root, half), data + off, len);
    publish();
    if (rank_ != root) {
      waitFor(root, progress_, wait);
      std::memcpy(data + off, segment_->slotHalf(root, half), len);
    }
    endRound(half);
  }
}

// The root reduces every rank's chunk, in rank order, into its tensor.
void ShmBackend::reduce(const OpCall& call, Wait& wait) {
  const int root = call.peer;
  const size_t elem = dtypeSize(call.input.dtype());
  const size_t total = static_cast<size_t>(call.input.numel());
  const size_t chunk = segment_->halfBytes() / elem;
  uint8_t* data = bytesOf(call.input);
  for (size_t off = 0; off < total; off += chunk) {
    const size_t n = std::min(chunk, total - off);
    const int half = beginRound(true, wait);
    std::memcpy(segment_->slotHalf(rank_, half), data + off * elem, n * elem);
    publish();
    if (rank_ == root) {
      waitForAll(progress_, wait);
      std::vector<const uint8_t*> sources;
      for (int r = 0; r < size_; ++r) sources.push_back(segment_->slotHalf(r, half));
      reduceInRankOrder(call, data + off * elem, sources, n);
    }
    endRound(half);
  }
}

// all_gather (every rank reads) and gather (the root, call.peer, reads): block r of the output is
// rank r's input.
void ShmBackend::allGather(const OpCall& call, Wait& wait, bool only_root_reads) {
  const size_t bytes = call.input.nbytes(), chunk = segment_->halfBytes();
  const bool reads = !only_root_reads || rank_ == call.peer;
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t len = std::min(chunk, bytes - off);
    const int half = beginRound(true, wait);
    std::memcpy(segment_->slotHalf(rank_, half), bytesOf(call.input) + off, len);
    publish();
    if (reads) {
      waitForAll(progress_, wait);
      for (int r = 0; r < size_; ++r) {
        std::memcpy(bytesOf(call.output) + static_cast<size_t>(r) * bytes + off,
                    segment_->slotHalf(r, half), len);
      }
    }
    endRound(half);
  }
}

// The ops whose input is one block per rank: reduce_scatter (rank r reduces block r of every
// rank), all_to_all (rank r gets block r of every rank, in rank order) and scatter (rank r gets
// block r of the root's). Each round stages a piece of every block, piece j in part j of the slot.
void ShmBackend::blockExchange(const OpCall& call, Wait& wait) {
  const bool rooted = call.op == CommOp::kScatter;
  const bool writes = !rooted || rank_ == call.peer;
  const size_t block = call.op == CommOp::kAllToAll
                           ? call.input.nbytes() / static_cast<size_t>(size_)
                           : call.output.nbytes();
  const DType dtype = call.output.dtype();
  const size_t part = subBlockBytes(dtypeSize(dtype));
  const size_t mine = static_cast<size_t>(rank_) * part;
  for (size_t off = 0; off < block; off += part) {
    const size_t len = std::min(part, block - off);
    const int half = beginRound(writes, wait);
    if (writes) {
      for (size_t j = 0; j < static_cast<size_t>(size_); ++j) {
        std::memcpy(segment_->slotHalf(rank_, half) + j * part,
                    bytesOf(call.input) + j * block + off, len);
      }
    }
    publish();
    if (rooted) {
      waitFor(call.peer, progress_, wait);
      std::memcpy(bytesOf(call.output) + off, segment_->slotHalf(call.peer, half) + mine, len);
    } else {
      waitForAll(progress_, wait);
      std::vector<const uint8_t*> sources;
      for (int r = 0; r < size_; ++r) sources.push_back(segment_->slotHalf(r, half) + mine);
      if (call.op == CommOp::kReduceScatter) {
        reduceInRankOrder(call, bytesOf(call.output) + off, sources, len / dtypeSize(dtype));
      } else {
        for (size_t j = 0; j < sources.size(); ++j)
          std::memcpy(bytesOf(call.output) + j * block + off, sources[j], len);
      }
    }
    endRound(half);
  }
}

// ------------------------------------------------------------------------------------------------
// Send and receive: each message is a header then its bytes, streamed through the ring from the
// sender to the receiver. A receive takes the first message with its tag; messages with other tags
// that arrive before it wait in the receiver's stash for their own receives.

void ShmBackend::sendMessage(const OpCall& call, Wait& wait) {
  Outbox& outbox = *outboxes_[static_cast<size_t>(call.peer)];
  std::lock_guard<std::mutex> lock(outbox.mutex);
  MessageHeader header{call.tag, 0, call.input.nbytes(), call.launched_us};
  writeRing(call.peer, reinterpret_cast<const uint8_t*>(&header), sizeof header, outbox.spins,
            wait);
  writeRing(call.peer, bytesOf(call.input), call.input.nbytes(), outbox.spins, wait);
}

int64_t ShmBackend::receiveMessage(const OpCall& call, Wait& wait) {
  Inbox& inbox = *inboxes_[static_cast<size_t>(call.peer)];
  std::lock_guard<std::mutex> lock(inbox.mutex);
  auto wrong_size = [&](uint64_t sent) {
    RM_THROW(kComm, fmt::format("shm recv (tag {}): rank {} sent {} bytes, the receive expects {}",
                                call.tag, call.peer, sent, call.input.nbytes()));
  };
  auto stashed = std::find_if(inbox.stash.begin(), inbox.stash.end(),
                              [&](const Stashed& s) { return s.tag == call.tag; });
  if (stashed != inbox.stash.end()) {
    if (stashed->bytes.size() != call.input.nbytes()) wrong_size(stashed->bytes.size());
    std::memcpy(bytesOf(call.input), stashed->bytes.data(), stashed->bytes.size());
    const int64_t launched = stashed->launched_us;
    inbox.stash.erase(stashed);
    return launched;
  }
  for (;;) {
    MessageHeader header;
    readRing(call.peer, reinterpret_cast<uint8_t*>(&header), sizeof header, inbox.spins, wait);
    if (header.tag == call.tag) {
      if (header.bytes != call.input.nbytes()) wrong_size(header.bytes);
      readRing(call.peer, bytesOf(call.input), header.bytes, inbox.spins, wait);
      return header.launched_us;
    }
    Stashed other{header.tag, header.launched_us, std::vector<uint8_t>(header.bytes)};
    readRing(call.peer, other.bytes.data(), header.bytes, inbox.spins, wait);
    inbox.stash.push_back(std::move(other));
  }
}

void ShmBackend::writeRing(int peer, const uint8_t* data, size_t bytes, ShmSpinBudget& spins,
                           Wait& wait) {
  ShmRingControl& control = segment_->ringControl(rank_, peer);
  uint8_t* ring = segment_->ring(rank_, peer);
  const size_t capacity = segment_->layout().ring_bytes;
  uint32_t head = control.head.value.load(std::memory_order_relaxed);  // this lane alone writes it
  while (bytes > 0) {
    const uint32_t tail = control.tail.value.load(std::memory_order_acquire);
    const size_t room = capacity - static_cast<uint32_t>(head - tail);
    if (room == 0) {
      shmWaitFor(control.tail, head - static_cast<uint32_t>(capacity) + 1, spins,
                 [&] { wait.check(peer); });
      continue;
    }
    // A quarter of the ring at most, so that the receiver starts reading early.
    const size_t len = std::min({room, bytes, capacity / 4});
    const size_t at = head & (capacity - 1), first = std::min(len, capacity - at);
    std::memcpy(ring + at, data, first);
    std::memcpy(ring, data + first, len - first);
    head += static_cast<uint32_t>(len);
    data += len;
    bytes -= len;
    shmPublish(control.head, head);
  }
}

void ShmBackend::readRing(int peer, uint8_t* data, size_t bytes, ShmSpinBudget& spins, Wait& wait) {
  ShmRingControl& control = segment_->ringControl(peer, rank_);
  const uint8_t* ring = segment_->ring(peer, rank_);
  const size_t capacity = segment_->layout().ring_bytes;
  uint32_t tail = control.tail.value.load(std::memory_order_relaxed);  // this lane alone moves it
  while (bytes > 0) {
    const uint32_t head = control.head.value.load(std::memory_order_acquire);
    const size_t ready = static_cast<uint32_t>(head - tail);
    if (ready == 0) {
      shmWaitFor(control.head, tail + 1, spins, [&] { wait.check(peer); });
      continue;
    }
    const size_t len = std::min(ready, bytes);
    const size_t at = tail & (capacity - 1), first = std::min(len, capacity - at);
    std::memcpy(data, ring + at, first);
    std::memcpy(data + first, ring, len - first);
    tail += static_cast<uint32_t>(len);
    data += len;
    bytes -= len;
    shmPublish(control.tail, tail);
  }
}

}  // namespace ringmaster
