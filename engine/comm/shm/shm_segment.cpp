// The shm segment: its rendezvous through the store, its layout, and the futex waits on its words.
#include "comm/shm/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

namespace {

constexpr uint32_t kMagic = 0x52534d31;  // "RSM1"

struct ShmHeader {
  uint32_t magic = kMagic;
  int32_t ranks = 0;
  uint64_t slot_bytes = 0;
  uint64_t ring_bytes = 0;
  alignas(64) std::atomic<uint32_t> aborted_by{0};
};

size_t alignUp(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// Byte offsets of each part of the mapping.
struct Offsets {
  size_t ranks, rings, slots, ring_data, total;
  explicit Offsets(const ShmLayout& l) {
    const auto n = static_cast<size_t>(l.ranks);
    ranks = alignUp(sizeof(ShmHeader), 4096);
    rings = alignUp(ranks + n * sizeof(ShmRankControl), 64);
    slots = alignUp(rings + n * n * sizeof(ShmRingControl), 4096);
    ring_data = slots + n * l.slot_bytes;
    total = ring_data + n * n * l.ring_bytes;
  }
};

std::string randomSegmentName() {
  std::random_device device;
  uint64_t bits = (static_cast<uint64_t>(device()) << 32) ^ device();
  return fmt::format("/ringmaster-shm-{}-{:016x}", ::getpid(), bits);
}

// Creates (rank 0) or opens the named segment and maps it; nullptr with `why` set on failure.
uint8_t* mapSegment(const std::string& name, size_t bytes, bool create, std::string* why) {
  const int flags = create ? (O_RDWR | O_CREAT | O_EXCL) : O_RDWR;
  const int fd = ::shm_open(name.c_str(), flags, 0600);
  if (fd < 0) {
    *why = fmt::format("shm_open {}: {}", name, std::strerror(errno));
    return nullptr;
  }
  void* base = MAP_FAILED;
  if (create) {
    // Reserve the pages now: a tmpfs out of room would otherwise kill a rank with SIGBUS later.
    int err = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
    if (err == 0) err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (err != 0) *why = fmt::format("sizing {} to {} bytes: {}", name, bytes, std::strerror(err));
    if (err == 0) base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  } else {
    struct stat st = {};
    if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes)
      base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    else
      *why = fmt::format("{} is not the size rank 0 made it", name);
  }
  if (base == MAP_FAILED && why->empty()) *why = fmt::format("mmap: {}", std::strerror(errno));
  if (base == MAP_FAILED && create) ::shm_unlink(name.c_str());  // nobody will map it
  ::close(fd);
  return base == MAP_FAILED ? nullptr : static_cast<uint8_t*>(base);
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Shared futexes (no FUTEX_PRIVATE_FLAG): the waiters are in other processes.
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

size_t ShmLayout::total() const {
  return Offsets(*this).total;
}

ShmSegment::ShmSegment(std::string name, uint8_t* base, ShmLayout layout)
    : name_(std::move(name)), base_(base), layout_(layout) {}

ShmSegment::~ShmSegment() {
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
  ::munmap(base_, layout_.total());
}

std::unique_ptr<ShmSegment> ShmSegment::rendezvous(Store& store, int rank, const ShmLayout& layout,
                                                   std::chrono::milliseconds timeout) {
  const size_t bytes = layout.total();
  std::string name, why;
  uint8_t* base = nullptr;
  if (rank == 0) {
    name = randomSegmentName();
    base = mapSegment(name, bytes, true, &why);
    if (base != nullptr) {
      auto* header = new (base) ShmHeader;
      header->ranks = layout.ranks;
      header->slot_bytes = layout.slot_bytes;
      header->ring_bytes = layout.ring_bytes;
      const Offsets at(layout);
      for (int r = 0; r < layout.ranks; ++r)
        new (base + at.ranks + static_cast<size_t>(r) * sizeof(ShmRankControl)) ShmRankControl;
      for (int p = 0; p < layout.ranks * layout.ranks; ++p)
        new (base + at.rings + static_cast<size_t>(p) * sizeof(ShmRingControl)) ShmRingControl;
    }
    store.set("shm/name", toBytes(base != nullptr ? name : std::string()));
  } else {
    store.wait({"shm/name"}, timeout);
    name = toString(store.get("shm/name"));
    if (!name.empty()) base = mapSegment(name, bytes, false, &why);
  }
  std::unique_ptr<ShmSegment> segment;
  if (base != nullptr) {
    segment.reset(new ShmSegment(name, base, layout));
    segment->rank(rank).pid = ::getpid();
  }
  store.set(fmt::format("shm/mapped/{}", rank), toBytes(base != nullptr ? "ok" : why));
  std::vector<std::string> everyone;
  for (int r = 0; r < layout.ranks; ++r) everyone.push_back(fmt::format("shm/mapped/{}", r));
  try {
    store.wait(everyone, timeout);
  } catch (...) {
    if (rank == 0 && !name.empty()) ::shm_unlink(name.c_str());
    throw;
  }
  // Every rank holds its mapping now: the name is no longer needed, and an unlinked segment goes
  // away with its last mapping, whatever way the processes end.
  if (rank == 0 && base != nullptr) ::shm_unlink(name.c_str());
  for (const std::string& key : everyone)
    if (toString(store.get(key)) != "ok") return nullptr;
  segment->watchPeers(rank);
  return segment;
}

void ShmSegment::watchPeers(int self) {
  pidfds_.assign(static_cast<size_t>(layout_.ranks), -1);
  for (int r = 0; r < layout_.ranks; ++r) {
    if (r == self) continue;
#ifdef SYS_pidfd_open
    pidfds_[static_cast<size_t>(r)] = static_cast<int>(::syscall(SYS_pidfd_open, rank(r).pid, 0));
#endif
  }
}

bool ShmSegment::rankExited(int r) const {
  const int fd = pidfds_.empty() ? -1 : pidfds_[static_cast<size_t>(r)];
  if (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }
  const int pid = const_cast<ShmSegment*>(this)->rank(r).pid;
  return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
}

ShmRankControl& ShmSegment::rank(int r) {
  return *reinterpret_cast<ShmRankControl*>(base_ + Offsets(layout_).ranks +
                                            static_cast<size_t>(r) * sizeof(ShmRankControl));
}

ShmRingControl& ShmSegment::ringControl(int sender, int receiver) {
  const auto pair = static_cast<size_t>(sender * layout_.ranks + receiver);
  return *reinterpret_cast<ShmRingControl*>(base_ + Offsets(layout_).rings +
                                            pair * sizeof(ShmRingControl));
}

uint8_t* ShmSegment::slotHalf(int r, int half) {
  return base_ + Offsets(layout_).slots + static_cast<size_t>(r) * layout_.slot_bytes +
         static_cast<size_t>(half) * halfBytes();
}

uint8_t* ShmSegment::ring(int sender, int receiver) {
  const auto pair = static_cast<size_t>(sender * layout_.ranks + receiver);
  return base_ + Offsets(layout_).ring_data + pair * layout_.ring_bytes;
}

std::atomic<uint32_t>& ShmSegment::abortedBy() {
  return reinterpret_cast<ShmHeader*>(base_)->aborted_by;
}

// ------------------------------------------------------------------------------------------------
// Waiting. The publisher stores the value, then reads the sleepers; a sleeper counts itself, then
// reads the value before it sleeps (both sequentially consistent): one of them sees the other, so
// no wake-up is lost, and an advance nobody sleeps on costs no system call.

void shmPublish(ShmCounter& counter, uint32_t value) {
  counter.value.store(value, std::memory_order_seq_cst);
  if (counter.sleepers.load(std::memory_order_seq_cst) > 0)
    futex(&counter.value, FUTEX_WAKE, INT_MAX, nullptr);
}

void shmWakeAll(ShmCounter& counter) {
  futex(&counter.value, FUTEX_WAKE, INT_MAX, nullptr);
}

int shmSpinsFor(int ranks) {
  // Measured with bench-comm on 2 cores (docs/comm.md): 4 ranks take 5-6 times as long at 4 KiB
  // spinning 4,096 times as 64; 2 ranks, each on its own core, often wait longer than 64 spins for
  // a peer in a small all_reduce.
  constexpr int kMostWithOwnCores = 1024;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int available = ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  return ranks <= available ? kMostWithOwnCores : ShmSpinBudget::kLeast;
}

void shmWaitFor(ShmCounter& counter, uint32_t target, ShmSpinBudget& spins,
                const std::function<void()>& check) {
  // Yielding 64 times before sleeping beat 16 (docs/comm.md).
  constexpr int kYields = 64;
  const int limit = spins.limit();
  for (int i = 0; i < limit; ++i) {
    if (shmReached(counter.value.load(std::memory_order_acquire), target)) {
      spins.reachedAfter(i);
      return;
    }
    cpuRelax();
  }
  spins.missed();
  for (int i = 0; i < kYields; ++i) {
    if (shmReached(counter.value.load(std::memory_order_acquire), target)) return;
    ::sched_yield();
  }
  const timespec nap{0, 50'000'000};  // between checks of abort, deadline and the peers' lives
  // A peer that reached the target and then ended is no failure: the target is read before each
  // check.
  while (!shmReached(counter.value.load(std::memory_order_acquire), target)) {
    check();
    counter.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = counter.value.load(std::memory_order_seq_cst);
    if (!shmReached(seen, target)) futex(&counter.value, FUTEX_WAIT, seen, &nap);
    counter.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace ringmaster
