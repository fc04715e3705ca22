// The shared driver behind every backend, apart from the operation entry points
// (communicator_ops.cpp): timing, flight recorder, failure propagation, the aligned clock and the
// threads. Threads per communicator: the op thread launches operations in program order (the order
// every rank must agree on), the completion thread waits for the collectives in the same order, a
// thread per (peer, direction) of point-to-point ops waits for those in their order, and the
// watchdog publishes progress and watches for other ranks' failures. A small collective called
// while nothing else is in flight, on a backend that finishes collectives inside launch (shm),
// runs on the caller's thread instead (runOnCaller; docs/comm.md).
#include "comm/communicator.h"

#include <array>
#include <cstring>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "telemetry/writer.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;
// A literal, not a std::string: a process that exits with a communicator alive must not find it
// destroyed under the watchdog.
constexpr char kFailureKey[] = "ringmaster/failure";

double nowUs() {
  return telemetryNow() * 1e6;
}

std::string progressKey(int rank) {
  return fmt::format("progress/{}", rank);
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Backend> backend, std::shared_ptr<Store> store,
                           std::shared_ptr<Store> job_store, int rank, int size,
                           std::string group_name, CommOptions options)
    : backend_(std::move(backend)),
      store_(std::move(store)),
      job_store_(std::move(job_store)),
      rank_(rank),
      size_(size),
      group_name_(std::move(group_name)),
      options_(std::move(options)),
      recorder_(options_.flight_recorder_entries) {
  RM_CHECK_ARG(size_ >= 1 && rank_ >= 0 && rank_ < size_,
               fmt::format("communicator: rank {} out of range for size {}", rank_, size_));
  world_ranks_.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) world_ranks_[static_cast<size_t>(r)] = r;
  op_thread_ = std::thread([this] { opLoop(); });
  completion_thread_ = std::thread([this] { completionLoop(); });
  if (size_ > 1) watchdog_thread_ = std::thread([this] { watchdogLoop(); });
  registerFlightRecorder(&recorder_);
}

Communicator::~Communicator() {
  unregisterFlightRecorder(&recorder_);
  bool busy;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    busy = in_flight_ > 0;
  }
  if (busy) abort("communicator destroyed with operations in flight");
  op_cv_.notify_all();
  completion_cv_.notify_all();
  { std::lock_guard<std::mutex> lock(watchdog_mutex_); }
  watchdog_cv_.notify_all();
  op_thread_.join();
  completion_thread_.join();
  for (auto& [key, lane] : p2p_lanes_) lane.thread.join();  // none is added after the op thread
  if (watchdog_thread_.joinable()) watchdog_thread_.join();
}

// ---------------------------------------------------------------------------------------------
// The clock aligned to rank 0's.

namespace {

// The kernel's boot id: processes that share it read one system clock.
std::string bootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace

int64_t Communicator::systemClockUs() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

int64_t Communicator::alignedNowUs() const {
  return systemClockUs() + clock_offset_us_.load();
}

void Communicator::alignClockToRankZero() {
  // NTP through the store: rank r writes a ping, rank 0 answers with its clock, and rank r takes
  // rank 0's time to be at the middle of the round trip. The round with the shortest trip wins.
  constexpr int kRounds = 5;
  const auto timeout = options_.timeout;
  Store& store = *store_;
  const int64_t generation = store.add(fmt::format("clock/calls/{}", rank_), 1);
  auto key = [&](int rank, const std::string& what) {
    return fmt::format("clock/{}/{}/{}", generation, rank, what);
  };
  auto round_key = [&](int rank, int round, const char* what) {
    return key(rank, fmt::format("{}/{}", round, what));
  };
  clock_offset_us_ = 0;
  clock_uncertainty_us_ = 0;
  if (size_ == 1) return;
  const std::string boot_id = bootId();
  if (rank_ == 0) {
    store.set(key(0, "boot"), toBytes(boot_id));
    for (int rank = 1; rank < size_; ++rank) {
      store.wait({key(rank, "mode")}, timeout);
      if (toString(store.get(key(rank, "mode"))) == "same") continue;
      for (int round = 0; round < kRounds; ++round) {
        store.wait({round_key(rank, round, "ping")}, timeout);
        store.set(round_key(rank, round, "pong"), toBytes(std::to_string(systemClockUs())));
      }
    }
    return;
  }
  store.wait({key(0, "boot")}, timeout);
  if (!boot_id.empty() && toString(store.get(key(0, "boot"))) == boot_id) {
    store.set(key(rank_, "mode"), toBytes("same"));
    return;
  }
  store.set(key(rank_, "mode"), toBytes("ntp"));
  int64_t best_round_trip = std::numeric_limits<int64_t>::max();
  for (int round = 0; round < kRounds; ++round) {
    const int64_t sent = systemClockUs();
    store.set(round_key(rank_, round, "ping"), {});
    store.wait({round_key(rank_, round, "pong")}, timeout);
    const int64_t remote = std::stoll(toString(store.get(round_key(rank_, round, "pong"))));
    const int64_t received = systemClockUs();
    if (received - sent < best_round_trip) {
      best_round_trip = received - sent;
      clock_offset_us_ = remote - (sent + received) / 2;
      clock_uncertainty_us_ = (best_round_trip + 1) / 2;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Threads.

void Communicator::opLoop() {
  for (;;) {
    std::unique_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      op_cv_.wait(lock, [&] { return !caller_launching_ && (stopping_ || !op_queue_.empty()); });
      if (op_queue_.empty()) {
        op_done_ = true;
        completion_cv_.notify_all();
        for (auto& [key, lane] : p2p_lanes_) lane.cv.notify_all();
        return;
      }
      task = std::move(op_queue_.front());
      op_queue_.pop_front();
      launching_ = task->work;
    }
    const bool p2p = isPointToPoint(task->call.op);
    launchTask(*task, systemClockUs());
    P2PLane* lane_to_wake = nullptr;
    std::unique_ptr<Task> finish_here;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      launching_.reset();
      if (!p2p && backend_->collectivesCompleteInLaunch() && completion_queue_.empty() &&
          !completion_busy_) {
        // Done already, and nothing before it waits to be completed: completing it here spares
        // the hand-off to the completion thread (a wake-up per operation; issue 36).
        finish_here = std::move(task);
      } else if (p2p) {
        // Sends and receives to different peers, or in different directions, complete in any
        // order: each (peer, direction) has a lane whose thread waits for its ops in order, so a
        // send is seen complete when it is, not when the in-order completion thread reaches it
        // behind a step's pre-posted receives. Between one pair in one direction messages
        // arrive in the order sent.
        P2PLane& lane = p2p_lanes_[{task->call.peer, task->call.op == CommOp::kSend}];
        lane.queue.push_back(std::move(task));
        if (!lane.thread.joinable())
          lane.thread = std::thread([this, &lane] { p2pLaneLoop(lane); });
        lane_to_wake = &lane;
      } else {
        completion_queue_.push_back(std::move(task));
      }
    }
    if (finish_here)
      finishTask(*finish_here);
    else if (lane_to_wake)
      lane_to_wake->cv.notify_one();
    else
      completion_cv_.notify_one();
  }
}

void Communicator::launchTask(Task& task, int64_t now_us) {
  if (failed_) return;
  const bool p2p = isPointToPoint(task.call.op);
  task.started = Clock::now();
  task.call.launched_us = now_us + clock_offset_us_.load();
  recorder_.transition(task.id, OpState::kStarted, static_cast<double>(now_us));
  if (!p2p) last_started_seq_ = task.call.seq;
  try {
    if (!p2p && options_.verify_calls) verifyCall(task);
    if (task.before) task.before();
    task.pending = backend_->launch(task.call);
    // A composed reduction's last part (AVG's division) belongs to the operation: it must be
    // done before the next operation, which may use the same buffer, starts.
    if (task.after) {
      task.pending->wait(task.started + options_.timeout);
      task.after();
      task.after = nullptr;
    }
  } catch (const Error& e) {
    if (!failed_) failWith(explainFailure(task.call, e), true);
  } catch (const std::exception& e) {
    if (!failed_)
      failWith(explainFailure(task.call, Error(ErrorKind::kComm, e.what(), __FILE__, __LINE__)),
               true);
  }
}

void Communicator::runOnCaller(Task& task, int64_t now_us) {
  launchTask(task, now_us);
  bool queued;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launching_.reset();
  }
  finishTask(task);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    caller_launching_ = false;
    queued = !op_queue_.empty() || stopping_;
  }
  // Another thread of the caller's may have queued an operation meanwhile: it starts now.
  if (queued) op_cv_.notify_one();
}

void Communicator::completionLoop() {
  for (;;) {
    std::unique_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      completion_cv_.wait(lock, [&] { return op_done_ || !completion_queue_.empty(); });
      if (completion_queue_.empty()) return;
      task = std::move(completion_queue_.front());
      completion_queue_.pop_front();
      completion_busy_ = true;
    }
    finishTask(*task);
    std::lock_guard<std::mutex> lock(mutex_);
    completion_busy_ = false;
  }
}

void Communicator::p2pLaneLoop(P2PLane& lane) {
  for (;;) {
    std::unique_ptr<Task> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      lane.cv.wait(lock, [&] { return op_done_ || !lane.queue.empty(); });
      if (lane.queue.empty()) return;
      task = std::move(lane.queue.front());
      lane.queue.pop_front();
      p2p_active_[task->id] = task->work;
    }
    finishTask(*task);
  }
}

void Communicator::finishTask(Task& task) {
  // The operation leaves in_flight_ before its caller hears of it, so that a caller that destroys
  // the communicator right after wait() does not find it busy.
  const bool p2p = isPointToPoint(task.call.op);
  auto finished = [this, &task, p2p](std::exception_ptr error, std::optional<double> duration_ms,
                                     std::optional<double> wait_ms) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --in_flight_;
      if (p2p) p2p_active_.erase(task.id);
    }
    if (error)
      task.work->fail(error);
    else
      task.work->complete(duration_ms, wait_ms);
  };
  try {
    if (!task.pending) throw Error(ErrorKind::kComm, "not started", __FILE__, __LINE__);
    task.pending->wait(task.started + options_.timeout);
    if (failed_) throw Error(ErrorKind::kComm, "aborted", __FILE__, __LINE__);
    const auto end = Clock::now();
    const std::optional<double> device_ms = task.pending->deviceMs();
    const double ms =
        device_ms.value_or(std::chrono::duration<double, std::milli>(end - task.started).count());
    const std::optional<double> wait_ms = task.pending->waitMs();
    // The operation's buffers (its tensors, the backend's copies) are released before the observer
    // and the caller hear it is done, so that the memory the caller frees after wait() is free
    // then, not when this thread next gets a core: otherwise a rank's peak depends on thread
    // scheduling.
    task.pending.reset();
    task.call.input = Tensor();
    task.call.output = Tensor();
    task.before = nullptr;
    // Bandwidth describes the transfer: the time spent waiting for a peer is not part of it.
    const double transfer_ms = std::max(0.0, ms - wait_ms.value_or(0.0));
    const int64_t end_system_us = systemClockUs();
    recorder_.transition(task.id, OpState::kCompleted, static_cast<double>(end_system_us));
    if (!p2p) last_completed_seq_ = task.call.seq;
    if (options_.observer) {
      // A collective's start and end on the aligned clock; storage splits its wait from them. On
      // NCCL the duration is the kernel's, which began no earlier than end - duration.
      std::optional<int64_t> start_us, end_us;
      if (!p2p) {
        end_us = end_system_us + clock_offset_us_.load();
        start_us = task.call.launched_us;
        if (device_ms) start_us = std::max(*start_us, *end_us - static_cast<int64_t>(ms * 1000.0));
      }
      const double algbw =
          transfer_ms > 0 ? static_cast<double>(task.bytes) / (transfer_ms * 1e6) : 0;
      CommRecord record{task.call.seq,
                        task.call.op,
                        group_name_,
                        size_,
                        task.bytes,
                        task.dtype,
                        ms,
                        algbw,
                        algbw * busFactor(task.call.op, size_),
                        wait_ms,
                        task.call.peer,
                        static_cast<double>(end_system_us) / 1e6,
                        start_us,
                        end_us,
                        mesh_dimension_};
      options_.observer->onOperation(record);
    }
    if (!p2p) completed_collective_ms_.fetch_add(ms, std::memory_order_relaxed);
    finished(nullptr, ms, wait_ms);
  } catch (const Error& e) {
    if (!failed_) failWith(explainFailure(task.call, e), true);
    recorder_.transition(task.id, OpState::kFailed, nowUs());
    Error root = [&] {
      std::lock_guard<std::mutex> lock(failure_mutex_);
      return *failure_;
    }();
    std::string message = root.message();
    if (message.rfind(describe(task.call), 0) != 0)
      message = fmt::format("{} aborted: {}", describe(task.call), message);
    finished(std::make_exception_ptr(Error(root.kind(), message, __FILE__, __LINE__)), std::nullopt,
             std::nullopt);
  }
}

void Communicator::watchdogLoop() {
  uint64_t heartbeat = 0;
  bool store_lost = false;
  const bool report = options_.observer && options_.progress_period.count() > 0;
  auto next_report = Clock::now() + options_.progress_period;
  std::vector<PeerProgress> previous_peers;
  std::unique_lock<std::mutex> lock(watchdog_mutex_);
  for (;;) {
    bool stop;
    {
      std::lock_guard<std::mutex> state(mutex_);
      stop = stopping_;
    }
    if (stop) return;
    lock.unlock();
    try {
      // "started completed heartbeat": the heartbeat advances every period, so peers can tell a
      // live rank that is merely behind from a dead or hung one.
      store_->set(progressKey(rank_),
                  toBytes(fmt::format("{} {} {}", last_started_seq_.load(),
                                      last_completed_seq_.load(), ++heartbeat)));
      if (!failed_ && job_store_->check({kFailureKey})) {
        std::string cause = toString(job_store_->get(kFailureKey));
        failWith(Error(ErrorKind::kComm, cause, __FILE__, __LINE__), false);
      }
      store_lost = false;
    } catch (const std::exception& e) {
      bool busy;
      {
        std::lock_guard<std::mutex> state(mutex_);
        busy = in_flight_ > 0;
      }
      if (busy && !failed_ && store_lost) {  // twice in a row, with work waiting on the peers
        failWith(Error(ErrorKind::kComm,
                       fmt::format("the rendezvous store is unreachable ({}); rank 0, which hosts "
                                   "it, may have died",
                                   e.what()),
                       __FILE__, __LINE__),
                 false);
      }
      store_lost = true;
    }
    if (report && !failed_ && Clock::now() >= next_report) {
      next_report = Clock::now() + options_.progress_period;
      reportProgress(previous_peers);
    }
    lock.lock();
    watchdog_cv_.wait_for(lock, options_.watchdog_period);
  }
}

void Communicator::verifyCall(const Task& task) {
  constexpr int64_t kFields = 6;
  const OpCall& call = task.call;
  const std::array<int64_t, kFields> mine{static_cast<int64_t>(call.seq),
                                          static_cast<int64_t>(call.op),
                                          static_cast<int64_t>(task.dtype),
                                          static_cast<int64_t>(task.bytes),
                                          call.peer,
                                          static_cast<int64_t>(call.reduce)};
  Tensor host_mine = Tensor::empty({kFields}, DType::kI64);
  std::memcpy(host_mine.raw(), mine.data(), sizeof mine);
  OpCall exchange{CommOp::kAllGather, call.seq, host_mine.to(backend_->device()),
                  Tensor::empty({kFields * size_}, DType::kI64, backend_->device())};
  exchange.timeout = options_.timeout;
  backend_->launch(exchange)->wait(Clock::now() + options_.timeout);
  Tensor everyone = exchange.output.to(Device::cpu());
  const auto* all = static_cast<const int64_t*>(everyone.raw());
  bool agree = true;
  for (int r = 0; r < size_ && agree; ++r)
    agree = std::equal(mine.begin(), mine.end(), all + r * kFields);
  if (agree) return;

  auto describeCall = [&](const int64_t* f) {
    auto op = static_cast<CommOp>(f[1]);
    std::string text = fmt::format("{} #{} of {} {} bytes", toString(op), f[0],
                                   commDTypeName(static_cast<DType>(f[2])), f[3]);
    if (f[4] >= 0) text += fmt::format(", root {}", f[4]);
    if (op == CommOp::kAllReduce || op == CommOp::kReduce || op == CommOp::kReduceScatter)
      text += fmt::format(", {}", toString(static_cast<ReduceKind>(f[5])));
    return text;
  };
  std::vector<std::string> calls;
  for (int r = 0; r < size_; ++r) {
    calls.push_back(fmt::format("rank {}: {}", world_ranks_[static_cast<size_t>(r)],
                                describeCall(all + r * kFields)));
  }
  RM_THROW(kInvalidArgument, fmt::format("the ranks of {} disagree on the collective they call: {}",
                                         group_name_, fmt::join(calls, "; ")));
}

std::vector<Communicator::PeerProgress> Communicator::peerProgress() {
  std::vector<PeerProgress> out(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    try {
      if (!store_->check({progressKey(r)})) continue;
      std::istringstream in(toString(store_->get(progressKey(r))));
      PeerProgress& p = out[static_cast<size_t>(r)];
      p.published = static_cast<bool>(in >> p.started >> p.completed >> p.heartbeat);
    } catch (const std::exception&) {
    }
  }
  return out;
}

void Communicator::reportProgress(std::vector<PeerProgress>& previous) {
  const FlightProgress flight = recorder_.progress();
  CommProgress p;
  p.group = group_name_;
  p.period_s = std::chrono::duration<double>(options_.progress_period).count();
  p.started = last_started_seq_.load();
  p.completed = last_completed_seq_.load();
  if (flight.last_completed_collective) p.completed_op = flight.last_completed_collective->op;
  bool read_peers = false;
  if (const auto& op = flight.oldest_in_flight) {
    p.op = op->op;
    p.op_seq = op->seq;
    if (op->peer >= 0 && op->peer < size_) p.peer = world_ranks_[static_cast<size_t>(op->peer)];
    p.waiting_ms = std::max(0.0, (nowUs() - op->started_us) / 1000);
    // Only a rank that has waited a whole period asks the store about its peers: a healthy run
    // costs the store nothing more than the heartbeats.
    if (p.waiting_ms >= p.period_s * 1000) {
      read_peers = true;
      const bool p2p = isPointToPoint(op->op);
      std::vector<PeerProgress> peers = peerProgress();
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        const auto i = static_cast<size_t>(r);
        if (!p2p && peers[i].published && peers[i].started < op->seq)
          p.not_arrived.push_back(world_ranks_[i]);
        if (!previous.empty() &&
            (!peers[i].published || peers[i].heartbeat == previous[i].heartbeat))
          p.silent.push_back(world_ranks_[i]);
      }
      previous = std::move(peers);
    }
  }
  if (!read_peers) previous.clear();
  try {
    options_.observer->onProgress(p);
  } catch (const std::exception&) {
    // An observer's problem is not the communicator's: the next period tries again.
  }
}

Error Communicator::explainFailure(const OpCall& call, const Error& error) {
  // Watch the peers' watchdogs for three periods: a rank that stopped beating died or hangs, a
  // rank still beating but short of this operation never called it.
  auto before = peerProgress();
  std::this_thread::sleep_for(options_.watchdog_period * 3);
  auto after = peerProgress();
  std::vector<int> silent, behind;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const PeerProgress &b = before[static_cast<size_t>(r)], &a = after[static_cast<size_t>(r)];
    if (!a.published || a.heartbeat == b.heartbeat) {
      silent.push_back(r);
    } else if (a.started < call.seq) {
      behind.push_back(r);
    }
  }
  const bool p2p = isPointToPoint(call.op);
  std::string message =
      error.kind() == ErrorKind::kTimeout
          ? fmt::format("{} timed out after {} ms", describe(call), options_.timeout.count())
          : fmt::format("{} failed: {}", describe(call), error.message());
  if (!silent.empty()) {
    message += fmt::format("; {} {} stopped responding (no heartbeat for {} ms: dead or hung)",
                           silent.size() == 1 ? "rank" : "ranks", describeRanks(silent),
                           (options_.watchdog_period * 3).count());
  }
  if (error.kind() == ErrorKind::kTimeout) {
    if (p2p) {
      message +=
          fmt::format("; rank {} did not match it", world_ranks_[static_cast<size_t>(call.peer)]);
    } else if (!behind.empty()) {
      message += "; ranks that did not reach it: " + describeRanks(behind);
    } else if (silent.empty()) {
      message += "; every rank reached it (the transfer itself stalled)";
    }
  }
  return Error(error.kind(), message, __FILE__, __LINE__);
}

std::optional<std::string> Communicator::publishedFailure() {
  try {
    if (job_store_->check({kFailureKey})) return toString(job_store_->get(kFailureKey));
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

void Communicator::failWith(const Error& error, bool publish) {
  if (publish) {
    // A peer that failed first published its cause before closing its connections: that, not
    // the broken connection it left us, is the root cause.
    if (auto cause = publishedFailure()) {
      failWith(Error(ErrorKind::kComm, *cause, __FILE__, __LINE__), false);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (failure_) return;
    failure_ = error;
    failed_ = true;
  }
  if (publish) {
    try {
      std::string cause = fmt::format("rank {} failed: {}",
                                      world_ranks_[static_cast<size_t>(rank_)], error.message());
      job_store_->compareSet(kFailureKey, {}, toBytes(cause));
    } catch (const std::exception&) {
      // The store is gone (rank 0 died): the peers see that themselves.
    }
  }
  failPendingWorks(error);
  backend_->abort();
  if (options_.observer) options_.observer->onFailure(error, recorder_.dump());
}

void Communicator::failPendingWorks(const Error& root) {
  std::vector<WorkPtr> works;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (launching_) works.push_back(launching_);
    for (const auto& task : op_queue_) works.push_back(task->work);
    for (const auto& task : completion_queue_) works.push_back(task->work);
    for (const auto& [key, lane] : p2p_lanes_)
      for (const auto& task : lane.queue) works.push_back(task->work);
    for (const auto& [id, work] : p2p_active_) works.push_back(work);
  }
  for (const WorkPtr& work : works) {
    std::string message = root.message();
    if (message.rfind(work->what(), 0) != 0)
      message = fmt::format("{} aborted: {}", work->what(), message);
    work->fail(std::make_exception_ptr(Error(root.kind(), message, __FILE__, __LINE__)));
  }
}

void Communicator::abort(const std::string& reason) {
  failWith(Error(ErrorKind::kComm, reason, __FILE__, __LINE__), true);
}

}  // namespace ringmaster
