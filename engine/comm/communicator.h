// Communicator: the one interface every strategy talks to (rank, size, every collective and
// point-to-point op of torch.distributed, sub-groups), and the shared driver behind every backend:
// it checks arguments, numbers operations, short-cuts one-rank groups, composes AVG and PREMUL_SUM
// where the backend lacks them, times each operation, keeps the flight recorder, and never hangs:
// every operation has a deadline, a failure on one rank is published in the store, and the other
// ranks abort within a watchdog period instead of waiting out their own timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/comm_op.h"
#include "comm/flight_recorder.h"
#include "comm/reduce_op.h"
#include "comm/store.h"
#include "comm/work.h"
#include "core/error.h"
#include "tensor/tensor.h"

namespace ringmaster {

// What timing reports for one finished operation.
struct CommRecord {
  uint64_t seq = 0;
  CommOp op = CommOp::kAllReduce;
  std::string group;
  int group_size = 1;
  uint64_t bytes = 0;  // as nccl-tests counts them (docs/comm.md)
  DType dtype = DType::kF32;
  double duration_ms = 0;
  double algbw_gbps = 0;  // bytes / duration
  double busbw_gbps = 0;  // algbw * busFactor(op, group_size)
  std::optional<double> wait_ms;
  int peer = -1;
  double end_time_s = 0;  // when it completed: seconds since the Unix epoch (telemetryNow's clock)
  // Collectives of a group of several ranks: when this rank took the op up (before verify_calls)
  // and when it completed, in microseconds on the clock aligned to rank 0's (docs/comm.md).
  std::optional<int64_t> start_us, end_us;
  // The device-mesh dimension the group spans ("dp", "tp", "pp"; empty: not on a mesh, the world).
  std::string dim;
};

// Where a communicator stands, reported every CommOptions::progress_period (the live hang view):
// the last collective completed, the operation it is in now, and, once that has waited a whole
// period, which peers have not started it and whose heartbeat stopped (read in the store).
struct CommProgress {
  std::string group;
  double period_s = 0;
  uint64_t started = 0;    // last collective started
  uint64_t completed = 0;  // last collective completed
  std::optional<CommOp> completed_op;
  std::optional<CommOp> op;      // the oldest operation started and not finished, if any
  uint64_t op_seq = 0;           // its sequence number (collective, or send / recv numbering)
  int peer = -1;                 // its root or peer as a world rank; -1: none
  double waiting_ms = 0;         // since it started
  std::vector<int> not_arrived;  // world ranks that have not started op_seq (collectives only)
  std::vector<int> silent;       // world ranks whose heartbeat did not move over a period
};

// Receives every finished operation and the failure of the communicator. Called from the
// communicator's threads; implementations must be thread-safe and quick.
class CommObserver {
 public:
  virtual ~CommObserver() = default;
  virtual void onOperation(const CommRecord& record) {}
  // Once, when the communicator fails: the root cause and the flight recorder (a JSON array).
  virtual void onFailure(const Error& error, const nlohmann::json& flight_recorder) {}
  // Every progress_period from the watchdog thread, while the communicator has not failed.
  virtual void onProgress(const CommProgress& progress) {}
};

struct CommOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // per operation
  std::chrono::milliseconds watchdog_period{100};  // failure polling and progress publishing
  // How often the observer hears onProgress (the telemetry progress event); 0: never.
  static constexpr std::chrono::milliseconds kProgressPeriod{2000};
  std::chrono::milliseconds progress_period{kProgressPeriod};
  size_t flight_recorder_entries = 1024;
  // Before each collective, the ranks exchange what they are about to call (op, sequence number,
  // dtype, bytes, root, reduce op) and fail with every rank's call named when they disagree,
  // instead of corrupting data or hanging (PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL). Costs one
  // small all_gather per collective; bench-comm turns it off to time the collective alone.
  bool verify_calls = true;
  // A collective of at most this many bytes, called while nothing else of this communicator is
  // queued or in flight, runs on the caller's thread when the backend finishes collectives inside
  // launch (shm): it returns completed, sparing the two thread hand-offs (to the op thread and back
  // to the caller's wait) that cost a small collective most of its time (docs/comm.md). The caller
  // gives up overlapping it with its own work, which such a small one hardly offers. 0: never.
  static constexpr uint64_t kCallerThreadMaxBytes = 64 << 10;
  uint64_t caller_thread_max_bytes = kCallerThreadMaxBytes;
  std::shared_ptr<CommObserver> observer;  // may be null
};

class Communicator {
 public:
  // Takes a connected backend for `rank` of `size` whose ranks share `store` (scoped to this
  // group; `job_store` is the unscoped store every group of the job shares, for failures).
  Communicator(std::unique_ptr<Backend> backend, std::shared_ptr<Store> store,
               std::shared_ptr<Store> job_store, int rank, int size, std::string group_name,
               CommOptions options);
  ~Communicator();

  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& groupName() const { return group_name_; }
  // The device-mesh dimension this group spans (parallel/device_mesh.h), named in every record;
  // groups made from it by newGroup inherit it. Set before the group's first operation on a mesh.
  void setMeshDimension(std::string dim) { mesh_dimension_ = std::move(dim); }
  const std::string& meshDimension() const { return mesh_dimension_; }
  std::string backendName() const { return backend_->name(); }
  Device device() const { return backend_->device(); }
  const CommOptions& options() const { return options_; }
  // Keeps every operation of this communicator off its caller's thread (caller_thread_max_bytes
  // 0), for a caller that starts a small collective to overlap it with its own work and wait a
  // step later (StopAgreement's flags): on the caller's thread it would wait there for the
  // slowest rank to arrive. Before the group's first operation, on the thread that makes them.
  void keepSmallCollectivesAsynchronous() { options_.caller_thread_max_bytes = 0; }
  // The group's key-value store (keys scoped to this group), for rendezvous beside the collectives.
  Store& store() const { return *store_; }

  // --- Collectives. Every one returns at once; wait() on the Work for the result. Tensors must
  // stay untouched until then; the communicator keeps them alive until the operation is done and
  // no longer: it drops its references before wait() returns. Shapes: docs/comm.md.
  WorkPtr allReduce(Tensor tensor, ReduceOp op = ReduceOp::sum());
  WorkPtr broadcast(Tensor tensor, int root);
  WorkPtr reduce(Tensor tensor, int root, ReduceOp op = ReduceOp::sum());
  // output holds size() blocks of input.numel() elements, rank r's input in block r.
  WorkPtr allGather(Tensor output, Tensor input);
  // input holds size() blocks of output.numel() elements; rank r gets the reduction of block r.
  WorkPtr reduceScatter(Tensor output, Tensor input, ReduceOp op = ReduceOp::sum());
  // input and output hold size() equal blocks; block j of rank i goes to block i of rank j.
  WorkPtr allToAll(Tensor output, Tensor input);
  // On root, output holds size() blocks of input.numel(); elsewhere output is ignored.
  WorkPtr gather(Tensor output, Tensor input, int root);
  // On root, input holds size() blocks of output.numel(); rank r receives block r.
  WorkPtr scatter(Tensor output, Tensor input, int root);
  WorkPtr barrier();

  // --- Point to point. isend / irecv return at once; send / recv wait.
  WorkPtr isend(Tensor tensor, int dst, int tag = 0);
  WorkPtr irecv(Tensor tensor, int src, int tag = 0);
  void send(Tensor tensor, int dst, int tag = 0) { isend(std::move(tensor), dst, tag)->wait(); }
  void recv(Tensor tensor, int src, int tag = 0) { irecv(std::move(tensor), src, tag)->wait(); }

  // A sub-group of the world ranks `ranks` (ascending group order is the list's order). Every rank
  // of this communicator must call it with the same list, in the same order of calls; members get
  // their communicator, the others nullptr. Usable concurrently with this one.
  std::unique_ptr<Communicator> newGroup(const std::vector<int>& ranks, std::string name = "");

  // Fails every pending and later operation with `reason`, publishes it for the other ranks and
  // unblocks the backend. Idempotent; the first reason wins.
  void abort(const std::string& reason);
  bool failed() const { return failed_.load(); }
  // The summed durations (CommRecord::duration_ms) of this group's collectives completed so far.
  // A caller that waits on each collective at once (tensor parallelism's) spends this in them.
  double completedCollectiveMs() const {
    return completed_collective_ms_.load(std::memory_order_relaxed);
  }

  const FlightRecorder& flightRecorder() const { return recorder_; }

  // --- A clock aligned to rank 0's (for schedules and point-to-point waits across hosts).
  // Collective: measures the offset of this rank's system clock to rank 0's through the store
  // (NTP's estimate: the round trip with the shortest time wins); ranks whose kernel is rank 0's
  // (same boot id) share its clock exactly and skip the measurement. Groups made after it inherit
  // the offset. Before it, the aligned clock is this rank's own system clock.
  void alignClockToRankZero();
  // Microseconds since the Unix epoch on rank 0's clock.
  int64_t alignedNowUs() const;
  int64_t clockOffsetUs() const { return clock_offset_us_.load(); }
  // Half the best round trip: how far the aligned clock may be from rank 0's (0 on its host).
  int64_t clockUncertaintyUs() const { return clock_uncertainty_us_.load(); }

 private:
  struct Task {
    OpCall call;
    uint64_t id = 0;
    uint64_t bytes = 0;
    DType dtype = DType::kF32;
    WorkPtr work;
    std::function<void()> before;  // runs on the op thread just before launch
    std::function<void()> after;   // runs on the op thread once the backend finished it
    std::chrono::steady_clock::time_point started;
    std::unique_ptr<PendingOp> pending;
  };

  WorkPtr enqueue(OpCall call, uint64_t bytes, DType dtype, std::function<void()> before = {},
                  std::function<void()> after = {});
  WorkPtr completedLocally(CommOp op, uint64_t bytes, DType dtype,
                           const std::function<void()>& run);
  // Whether a collective of `bytes` may run on its caller's thread (CommOptions).
  bool mayRunOnCaller(const OpCall& call, uint64_t bytes) const;
  // Runs `task`, claimed by enqueue for the caller's thread at `now_us` (systemClockUs), to
  // completion there.
  void runOnCaller(Task& task, int64_t now_us);
  void opLoop();
  // Hands `task` to the backend at `now_us` (systemClockUs) after verify_calls and its `before`;
  // a failure fails the communicator. The op thread's, or the caller's for a collective it runs
  // itself.
  void launchTask(Task& task, int64_t now_us);
  // Microseconds since the Unix epoch on this rank's system clock (telemetryNow's, unaligned):
  // read once per step of an operation, each read costing about 50 ns under KVM.
  static int64_t systemClockUs();
  void completionLoop();
  struct P2PLane {
    std::deque<std::unique_ptr<Task>> queue;  // guarded by mutex_
    std::condition_variable cv;               // the queue grew, or the op thread ended
    std::thread thread;                       // started by the op thread under mutex_
  };
  void p2pLaneLoop(P2PLane& lane);
  // Waits for a launched task, records it and completes (or fails) its Work.
  void finishTask(Task& task);
  void watchdogLoop();
  // Marks the communicator failed (first caller wins), publishes and reports it.
  void failWith(const Error& error, bool publish);
  // Fails the Work of every queued or running operation at once with the root cause, so that no
  // caller waits for a backend that is still unwinding.
  void failPendingWorks(const Error& root);
  // The failure another rank published for the job, if any.
  std::optional<std::string> publishedFailure();
  // verify_calls: exchanges `task`'s signature with the peers; throws kInvalidArgument naming
  // every rank's call when they disagree.
  void verifyCall(const Task& task);
  // What a peer's watchdog last published.
  struct PeerProgress {
    bool published = false;
    uint64_t started = 0;    // last collective started
    uint64_t completed = 0;  // last collective completed
    uint64_t heartbeat = 0;  // advances every watchdog period while the peer lives
  };
  std::vector<PeerProgress> peerProgress();
  // Tells the observer where this communicator stands; `previous` is the peers' progress read at
  // the previous report (empty: none), to tell whose heartbeat stopped.
  void reportProgress(std::vector<PeerProgress>& previous);
  // The error `call` failed with, completed with what the peers' progress tells: which ranks
  // stopped responding, and for a timeout which ranks never reached the operation.
  Error explainFailure(const OpCall& call, const Error& error);
  std::string describe(const OpCall& call) const;
  std::string describeRanks(const std::vector<int>& group_ranks) const;
  void checkTensor(const Tensor& t, const char* what) const;

  std::unique_ptr<Backend> backend_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<Store> job_store_;
  int rank_;
  int size_;
  std::string group_name_;
  std::string mesh_dimension_;
  CommOptions options_;
  std::vector<int> world_ranks_;  // world rank of each group rank, for messages
  FlightRecorder recorder_;

  std::mutex mutex_;
  std::condition_variable op_cv_;
  std::condition_variable completion_cv_;
  std::deque<std::unique_ptr<Task>> op_queue_;          // guarded by mutex_
  std::deque<std::unique_ptr<Task>> completion_queue_;  // guarded by mutex_
  // Launched sends and receives by (peer, is send); nodes stay put, so a lane's thread keeps its
  // reference. Added to by the op thread under mutex_.
  std::map<std::pair<int, bool>, P2PLane> p2p_lanes_;
  std::map<uint64_t, WorkPtr> p2p_active_;  // guarded by mutex_: those being waited for, by id
  bool stopping_ = false;                   // guarded by mutex_
  bool op_done_ = false;                    // guarded by mutex_: the op thread ended
  bool completion_busy_ = false;  // guarded by mutex_: the completion thread is finishing a task
  uint64_t next_id_ = 1;          // guarded by mutex_
  uint64_t next_collective_seq_ = 1;  // guarded by mutex_
  uint64_t next_p2p_seq_ = 1;         // guarded by mutex_
  uint64_t groups_created_ = 0;       // guarded by mutex_
  int in_flight_ = 0;                 // guarded by mutex_: queued or running
  WorkPtr launching_;  // guarded by mutex_: the op being launched (op thread or caller's thread)
  // guarded by mutex_: a caller's thread is running an operation (runOnCaller); the op thread
  // launches nothing meanwhile, so that the backend still sees one operation at a time.
  bool caller_launching_ = false;

  std::atomic<uint64_t> last_started_seq_{0};    // collectives
  std::atomic<uint64_t> last_completed_seq_{0};  // collectives
  std::atomic<bool> failed_{false};
  std::atomic<double> completed_collective_ms_{0};  // written by the completion thread alone
  std::atomic<int64_t> clock_offset_us_{0};  // add to this rank's system clock to get rank 0's
  std::atomic<int64_t> clock_uncertainty_us_{0};
  std::mutex failure_mutex_;
  std::optional<Error> failure_;  // guarded by failure_mutex_

  std::mutex watchdog_mutex_;
  std::condition_variable watchdog_cv_;
  std::thread op_thread_;
  std::thread completion_thread_;
  std::thread watchdog_thread_;
};

}  // namespace ringmaster
