// The shared-memory backend: CPU tensors between ranks that all run on this host (Linux), through
// one shm segment per group (shm_segment.h). Collectives stage each rank's data in its own slot and
// every rank reads the peers' slots directly, in rounds that alternate between each slot's two
// halves; send / recv stream through a mailbox ring per ordered pair. It does not reach other
// hosts: a group with a rank elsewhere uses Gloo over TCP whole (process_group.cpp chooses).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/shm/shm_segment.h"

namespace ringmaster {

struct ShmOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // the rendezvous
  // Per rank: two halves a round alternates between. Halves of 512 KiB stay in a core's L2 and
  // beat 2 MiB ones from 1 MiB on (docs/comm.md).
  size_t slot_bytes = size_t{1} << 20;
  size_t ring_bytes = size_t{256} << 10;  // per ordered pair of ranks, a power of two
  // all_reduce up to this size: every rank reduces every slot (one round trip); above it, each
  // rank reduces its share and the others copy it (two).
  size_t small_allreduce_bytes = size_t{16} << 10;
  // The most a waiting rank spins before yielding its core (ShmSpinBudget); 0: shmSpinsFor's
  // choice.
  int spins = 0;
};

class ShmBackend : public Backend {
 public:
  // Whether every rank of the group runs on this host (same boot id, host name and PID namespace),
  // agreed through `store`: every rank gets the same answer. Collective.
  static bool everyRankOnThisHost(Store& store, int rank, int size,
                                  std::chrono::milliseconds timeout);
  // Maps this group's segment; nullptr on every rank where some rank could not (the caller falls
  // back to another transport). Collective.
  static std::unique_ptr<ShmBackend> connect(std::shared_ptr<Store> store, int rank, int size,
                                             const ShmOptions& options);
  ~ShmBackend() override;

  std::string name() const override { return "shm"; }
  Device device() const override { return Device::cpu(); }
  bool collectivesCompleteInLaunch() const override { return true; }
  std::unique_ptr<PendingOp> launch(const OpCall& call) override;
  void abort() override;
  std::unique_ptr<Backend> split(std::shared_ptr<Store> store, int group_rank,
                                 int group_size) override;

 private:
  class P2POp;
  struct Wait;  // what a blocked rank checks between sleeps
  // The messages from one peer read off its ring for receives with other tags, in arrival order.
  struct Stashed {
    int tag = 0;
    int64_t launched_us = 0;
    std::vector<uint8_t> bytes;
  };
  struct Inbox {
    explicit Inbox(int most_spins) : spins(most_spins) {}
    std::mutex mutex;  // one receiving lane per peer; held while it reads
    std::deque<Stashed> stash;
    ShmSpinBudget spins;
  };
  struct Outbox {
    explicit Outbox(int most_spins) : spins(most_spins) {}
    std::mutex mutex;  // one sending lane per peer; held while it writes
    ShmSpinBudget spins;
  };

  ShmBackend(std::unique_ptr<ShmSegment> segment, int rank, int size, ShmOptions options);
  void runCollective(const OpCall& call);

  // Rounds: each collective is a series of phases; every rank advances its progress counter once
  // per phase, so all ranks agree on the counter values and can wait for each other's.
  void publish();
  void waitFor(int peer, uint32_t target, Wait& wait);
  void waitForAll(uint32_t target, Wait& wait);
  // The next round's half of every slot; waits until no rank still reads what it held before.
  int beginRound(bool writes, Wait& wait);
  void endRound(int half);
  size_t subBlockBytes(size_t elem) const;

  void allReduce(const OpCall& call, Wait& wait);
  void allReduceSmall(const OpCall& call, Wait& wait);
  void allReduceLarge(const OpCall& call, Wait& wait);
  void broadcast(const OpCall& call, Wait& wait);
  void reduce(const OpCall& call, Wait& wait);
  void allGather(const OpCall& call, Wait& wait, bool only_root_reads);
  void blockExchange(const OpCall& call, Wait& wait);  // reduce_scatter, all_to_all, scatter
  void barrier(Wait& wait);

  void sendMessage(const OpCall& call, Wait& wait);
  int64_t receiveMessage(const OpCall& call, Wait& wait);  // the sender's launch time
  void writeRing(int peer, const uint8_t* data, size_t bytes, ShmSpinBudget& spins, Wait& wait);
  void readRing(int peer, uint8_t* data, size_t bytes, ShmSpinBudget& spins, Wait& wait);

  std::unique_ptr<ShmSegment> segment_;
  int rank_;
  int size_;
  ShmOptions options_;
  int most_spins_;  // before a wait yields the core (ShmOptions::spins)
  std::atomic<bool> aborted_{false};
  // The collectives run one at a time, on the communicator's op thread or on a caller's thread
  // (Communicator::runOnCaller), never on both at once: these are theirs.
  uint32_t progress_ = 0;
  uint64_t rounds_ = 0;
  uint32_t released_[2] = {0, 0};  // the progress at which every rank was done with each half
  ShmSpinBudget collective_spins_;
  std::vector<std::unique_ptr<Inbox>> inboxes_;    // per peer
  std::vector<std::unique_ptr<Outbox>> outboxes_;  // per peer
};

}  // namespace ringmaster
