// The shared-memory segment behind the shm backend: one POSIX shm mapping per group, made by rank
// 0 and unlinked as soon as every rank has mapped it (so nothing stays in /dev/shm once the group
// is up), laid out as a header, per-rank control words, per-pair mailbox controls, per-rank staging
// slots and per-pair mailbox rings. Also the wait every rank uses on a word a peer advances: a
// short spin, then a shared futex with a short timeout between checks of abort, deadline and peer
// life. It knows nothing of the collectives (shm_backend.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/store.h"

namespace ringmaster {

// A word one rank advances and others wait on, with the count of its sleepers (so that an advance
// makes a futex call only when someone sleeps).
struct alignas(64) ShmCounter {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleepers{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shm counters must be lock-free");

// Per rank: its progress through the collectives, its pid (for liveness), and whether its backend
// is gone (a communicator destroyed while its process lives on).
struct ShmRankControl {
  ShmCounter progress;
  int32_t pid = 0;
  std::atomic<uint32_t> departed{0};
};

// Per ordered pair (sender, receiver): the mailbox ring's byte counters (wrapping at 2^32; the
// ring's size divides it).
struct ShmRingControl {
  ShmCounter head;  // bytes the sender has written
  ShmCounter tail;  // bytes the receiver has consumed
};

struct ShmLayout {
  int ranks = 0;
  size_t slot_bytes = 0;  // per rank, two halves
  size_t ring_bytes = 0;  // per ordered pair, a power of two
  size_t total() const;
};

class ShmSegment {
 public:
  // Rank 0 creates the segment and publishes its name in `store`; every rank maps it, and once all
  // have (or one could not), rank 0 unlinks it. Returns nullptr on every rank where any rank could
  // not map it (no shared /dev/shm, out of room): the caller then uses another transport.
  static std::unique_ptr<ShmSegment> rendezvous(Store& store, int rank, const ShmLayout& layout,
                                                std::chrono::milliseconds timeout);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  int ranks() const { return layout_.ranks; }
  const ShmLayout& layout() const { return layout_; }
  ShmRankControl& rank(int r);
  ShmRingControl& ringControl(int sender, int receiver);
  uint8_t* slotHalf(int r, int half);
  size_t halfBytes() const { return layout_.slot_bytes / 2; }
  uint8_t* ring(int sender, int receiver);
  // Set by the first rank whose backend aborted (its rank + 1); every waiter checks it.
  std::atomic<uint32_t>& abortedBy();
  // Whether rank r's process has ended (a pidfd where the kernel has them; a zombie counts).
  bool rankExited(int r) const;
  std::string name() const { return name_; }

 private:
  ShmSegment(std::string name, uint8_t* base, ShmLayout layout);
  void watchPeers(int self);

  std::string name_;
  uint8_t* base_;
  ShmLayout layout_;
  std::vector<int> pidfds_;  // per rank, -1 where none
};

// Advances a counter to `value` and wakes its sleepers, in every process.
void shmPublish(ShmCounter& counter, uint32_t value);
// Whether `value` has reached `target` (wrap-safe).
inline bool shmReached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}
// How long a waiting rank spins before it yields its core, adapting as glibc's adaptive mutexes
// do. Spinning wins while the awaited rank runs on another core (a small all_reduce's peer answers
// within microseconds); it loses when the two share a core, because then the peer cannot run until
// the spinner yields. Which holds is not known in advance (another job may take the other core).
// A wait that reached its target while spinning keeps the limit at least twice what it took; one
// that had to yield lowers it by an eighth (a run of them, as on a shared core, brings it to the
// least within about twenty waits; one late peer hardly moves it); every kProbeEvery-th wait spins
// the whole `most` to find out whether spinning pays again. Not thread-safe: one per waiting
// thread or lane.
class ShmSpinBudget {
 public:
  static constexpr int kLeast = 64;  // about 1.5 us of pauses on an AMD EPYC
  static constexpr int kProbeEvery = 32;
  explicit ShmSpinBudget(int most) : most_(std::max(most, kLeast)), limit_(most_) {}
  // The spins the next wait may make.
  int limit() { return ++waits_ % kProbeEvery == 0 ? most_ : limit_; }
  void reachedAfter(int spins) { limit_ = std::min(most_, std::max(limit_, 2 * spins + kLeast)); }
  void missed() { limit_ = std::max(kLeast, limit_ - limit_ / 8); }

 private:
  int most_;
  int limit_;
  uint32_t waits_ = 0;
};

// The most a rank of a group of `ranks` on this host spins before yielding: ShmSpinBudget's
// adaptive limit when each can hold a core of its own (this process may run on at least `ranks`
// CPUs); its least when they must share cores, where a spinner keeps the rank it waits for off its
// core.
int shmSpinsFor(int ranks);
// Waits until `counter` reaches `target`: spins up to `spins.limit()` times, then yields its core a
// while, then sleeps. `check` runs between sleeps (about every 50 ms, and after the spin), only
// while the target is not reached: it throws to end the wait (abort, deadline, a dead peer).
void shmWaitFor(ShmCounter& counter, uint32_t target, ShmSpinBudget& spins,
                const std::function<void()>& check);
// Wakes every sleeper on `counter` (abort).
void shmWakeAll(ShmCounter& counter);

}  // namespace ringmaster
