// The communicator's operation entry points: argument checks, every collective and
// point-to-point op of communicator.h (one-rank short cuts, AVG and PREMUL_SUM composed where the
// backend lacks them), their hand-off to the op thread, and sub-groups. The threads, the watchdog
// and failure handling are in communicator.cpp.
#include "comm/communicator.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "telemetry/writer.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

double nowUs() {
  return telemetryNow() * 1e6;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Argument checks and descriptions.

void Communicator::checkTensor(const Tensor& t, const char* what) const {
  RM_CHECK_ARG(t.defined(), fmt::format("{} on {}: tensor is undefined", what, group_name_));
  RM_CHECK_ARG(
      t.device() == backend_->device(),
      fmt::format("{} on {}: tensor is on {}, the {} backend works on {}", what, group_name_,
                  t.device().str(), backend_->name(), backend_->device().str()));
}

std::string Communicator::describe(const OpCall& call) const {
  bool p2p = isPointToPoint(call.op);
  std::string text = fmt::format("{} #{} on {}", toString(call.op), call.seq, group_name_);
  if (p2p)
    text += fmt::format(" ({} rank {}, tag {})", call.op == CommOp::kSend ? "to" : "from",
                        call.peer, call.tag);
  return text;
}

std::string Communicator::describeRanks(const std::vector<int>& group_ranks) const {
  std::vector<std::string> parts;
  for (int r : group_ranks) parts.push_back(std::to_string(world_ranks_[static_cast<size_t>(r)]));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// ---------------------------------------------------------------------------------------------
// Operations.

WorkPtr Communicator::completedLocally(CommOp op, uint64_t bytes, DType dtype,
                                       const std::function<void()>& run) {
  uint64_t id, seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_id_++;
    seq = next_collective_seq_++;
  }
  FlightEntry entry{id,      seq,     op, group_name_, bytes, dtype, -1, OpState::kStarted,
                    nowUs(), nowUs(), 0};
  recorder_.record(entry);
  auto work = std::make_shared<Work>(fmt::format("{} #{} on {}", toString(op), seq, group_name_),
                                     options_.timeout);
  auto start = Clock::now();
  run();
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  recorder_.transition(id, OpState::kCompleted, nowUs());
  last_started_seq_ = seq;
  last_completed_seq_ = seq;
  if (options_.observer) {
    CommRecord record{seq,
                      op,
                      group_name_,
                      1,
                      bytes,
                      dtype,
                      ms,
                      ms > 0 ? bytes / (ms * 1e6) : 0,
                      0,
                      std::nullopt,
                      -1,
                      telemetryNow(),
                      {},
                      {},
                      mesh_dimension_};
    options_.observer->onOperation(record);
  }
  work->complete(ms);
  return work;
}

WorkPtr Communicator::enqueue(OpCall call, uint64_t bytes, DType dtype,
                              std::function<void()> before, std::function<void()> after) {
  auto task = std::make_unique<Task>();
  const bool p2p = isPointToPoint(call.op);
  const bool may_run_here = mayRunOnCaller(call, bytes);
  call.timeout = options_.timeout;
  task->call = std::move(call);
  task->bytes = bytes;
  task->dtype = dtype;
  task->before = std::move(before);
  task->after = std::move(after);
  WorkPtr work;
  bool run_here = false;
  const int64_t now_us = systemClockUs();
  {
    // Numbered and queued in one step: operations called from several threads are launched in
    // the order of their numbers, which the ranks compare (verify_calls).
    std::lock_guard<std::mutex> lock(mutex_);
    task->id = next_id_++;
    task->call.seq = p2p ? next_p2p_seq_++ : next_collective_seq_++;
    task->work = std::make_shared<Work>(describe(task->call), options_.timeout);
    work = task->work;
    recorder_.record({task->id, task->call.seq, task->call.op, group_name_, bytes, dtype,
                      task->call.peer, OpState::kScheduled, static_cast<double>(now_us), 0, 0});
    ++in_flight_;
    // Nothing else queued, launching or waited for: the op thread is idle, and stays so until
    // runOnCaller is done.
    run_here = may_run_here && in_flight_ == 1 && !caller_launching_ && !stopping_;
    if (run_here) {
      caller_launching_ = true;
      launching_ = work;
    } else {
      op_queue_.push_back(std::move(task));
    }
  }
  if (run_here) {
    runOnCaller(*task, now_us);
  } else {
    op_cv_.notify_one();
  }
  return work;
}

bool Communicator::mayRunOnCaller(const OpCall& call, uint64_t bytes) const {
  const bool p2p = isPointToPoint(call.op);
  return !p2p && options_.caller_thread_max_bytes > 0 &&
         bytes <= options_.caller_thread_max_bytes && backend_->collectivesCompleteInLaunch();
}

WorkPtr Communicator::allReduce(Tensor tensor, ReduceOp op) {
  checkTensor(tensor, "all_reduce");
  checkReduceSupported(op, tensor.dtype());
  uint64_t bytes = tensor.nbytes();
  if (size_ == 1) {
    return completedLocally(CommOp::kAllReduce, bytes, tensor.dtype(), [&] {
      if (op.kind == ReduceKind::kPremulSum)
        scaleInPlace(tensor.dtype(), tensor.raw(), tensor.numel(), op.factor);
    });
  }
  OpCall call{CommOp::kAllReduce, 0, tensor, {}, op.kind, op.factor};
  std::function<void()> before, after;
  if (!backend_->nativeReduce(op.kind)) {
    call.reduce = baseKind(op.kind);
    if (op.kind == ReduceKind::kPremulSum) {
      before = [tensor, op]() mutable {
        scaleInPlace(tensor.dtype(), tensor.raw(), tensor.numel(), op.factor);
      };
    }
    if (op.kind == ReduceKind::kAvg) {
      after = [tensor, n = size_]() mutable {
        divideInPlace(tensor.dtype(), tensor.raw(), tensor.numel(), n);
      };
    }
  }
  return enqueue(std::move(call), bytes, tensor.dtype(), std::move(before), std::move(after));
}

WorkPtr Communicator::broadcast(Tensor tensor, int root) {
  checkTensor(tensor, "broadcast");
  RM_CHECK_ARG(
      root >= 0 && root < size_,
      fmt::format("broadcast on {}: root {} out of range for {} ranks", group_name_, root, size_));
  if (size_ == 1)
    return completedLocally(CommOp::kBroadcast, tensor.nbytes(), tensor.dtype(), [] {});
  OpCall call{CommOp::kBroadcast, 0, tensor};
  call.peer = root;
  return enqueue(std::move(call), tensor.nbytes(), tensor.dtype());
}

WorkPtr Communicator::reduce(Tensor tensor, int root, ReduceOp op) {
  checkTensor(tensor, "reduce");
  checkReduceSupported(op, tensor.dtype());
  RM_CHECK_ARG(
      root >= 0 && root < size_,
      fmt::format("reduce on {}: root {} out of range for {} ranks", group_name_, root, size_));
  uint64_t bytes = tensor.nbytes();
  if (size_ == 1) {
    return completedLocally(CommOp::kReduce, bytes, tensor.dtype(), [&] {
      if (op.kind == ReduceKind::kPremulSum)
        scaleInPlace(tensor.dtype(), tensor.raw(), tensor.numel(), op.factor);
    });
  }
  OpCall call{CommOp::kReduce, 0, tensor, {}, op.kind, op.factor};
  call.peer = root;
  std::function<void()> before, after;
  if (!backend_->nativeReduce(op.kind)) {
    call.reduce = baseKind(op.kind);
    if (op.kind == ReduceKind::kPremulSum) {
      before = [tensor, op]() mutable {
        scaleInPlace(tensor.dtype(), tensor.raw(), tensor.numel(), op.factor);
      };
    }
    if (op.kind == ReduceKind::kAvg && rank_ == root) {
      after = [tensor, n = size_]() mutable {
        divideInPlace(tensor.dtype(), tensor.raw(), tensor.numel(), n);
      };
    }
  }
  return enqueue(std::move(call), bytes, tensor.dtype(), std::move(before), std::move(after));
}

WorkPtr Communicator::allGather(Tensor output, Tensor input) {
  checkTensor(output, "all_gather");
  checkTensor(input, "all_gather");
  RM_CHECK_ARG(output.dtype() == input.dtype() && output.numel() == input.numel() * size_,
               fmt::format("all_gather on {}: output must hold {} x {} {} elements, got {} {}",
                           group_name_, size_, input.numel(), commDTypeName(input.dtype()),
                           output.numel(), commDTypeName(output.dtype())));
  if (size_ == 1)
    return completedLocally(CommOp::kAllGather, output.nbytes(), input.dtype(),
                            [&] { output.copyFrom(input); });
  OpCall call{CommOp::kAllGather, 0, input, output};
  return enqueue(std::move(call), output.nbytes(), input.dtype());
}

WorkPtr Communicator::reduceScatter(Tensor output, Tensor input, ReduceOp op) {
  checkTensor(output, "reduce_scatter");
  checkTensor(input, "reduce_scatter");
  checkReduceSupported(op, input.dtype());
  RM_CHECK_ARG(output.dtype() == input.dtype() && input.numel() == output.numel() * size_,
               fmt::format("reduce_scatter on {}: input must hold {} x {} {} elements, got {} {}",
                           group_name_, size_, output.numel(), commDTypeName(output.dtype()),
                           input.numel(), commDTypeName(input.dtype())));
  uint64_t bytes = input.nbytes();
  if (size_ == 1) {
    return completedLocally(CommOp::kReduceScatter, bytes, input.dtype(), [&] {
      output.copyFrom(input);
      if (op.kind == ReduceKind::kPremulSum)
        scaleInPlace(output.dtype(), output.raw(), output.numel(), op.factor);
    });
  }
  OpCall call{CommOp::kReduceScatter, 0, input, output, op.kind, op.factor};
  std::function<void()> after;
  if (!backend_->nativeReduce(op.kind)) {
    call.reduce = baseKind(op.kind);
    if (op.kind == ReduceKind::kPremulSum) {  // scale a copy: the caller's input stays as it was
      Tensor scaled = input.clone();
      scaleInPlace(scaled.dtype(), scaled.raw(), scaled.numel(), op.factor);
      call.input = scaled;
    }
    if (op.kind == ReduceKind::kAvg) {
      after = [output, n = size_]() mutable {
        divideInPlace(output.dtype(), output.raw(), output.numel(), n);
      };
    }
  }
  return enqueue(std::move(call), bytes, input.dtype(), {}, std::move(after));
}

WorkPtr Communicator::allToAll(Tensor output, Tensor input) {
  checkTensor(output, "all_to_all");
  checkTensor(input, "all_to_all");
  RM_CHECK_ARG(
      output.dtype() == input.dtype() && output.numel() == input.numel() &&
          input.numel() % size_ == 0,
      fmt::format(
          "all_to_all on {}: input and output must have the same dtype and a numel divisible "
          "by {}, got {} and {}",
          group_name_, size_, input.numel(), output.numel()));
  if (size_ == 1)
    return completedLocally(CommOp::kAllToAll, input.nbytes(), input.dtype(),
                            [&] { output.copyFrom(input); });
  OpCall call{CommOp::kAllToAll, 0, input, output};
  return enqueue(std::move(call), input.nbytes(), input.dtype());
}

WorkPtr Communicator::gather(Tensor output, Tensor input, int root) {
  checkTensor(input, "gather");
  RM_CHECK_ARG(
      root >= 0 && root < size_,
      fmt::format("gather on {}: root {} out of range for {} ranks", group_name_, root, size_));
  if (rank_ == root) {
    checkTensor(output, "gather");
    RM_CHECK_ARG(output.dtype() == input.dtype() && output.numel() == input.numel() * size_,
                 fmt::format("gather on {}: the root's output must hold {} x {} elements, got {}",
                             group_name_, size_, input.numel(), output.numel()));
  }
  uint64_t bytes = input.nbytes() * static_cast<uint64_t>(size_);
  if (size_ == 1)
    return completedLocally(CommOp::kGather, bytes, input.dtype(), [&] { output.copyFrom(input); });
  OpCall call{CommOp::kGather, 0, input, rank_ == root ? output : Tensor()};
  call.peer = root;
  return enqueue(std::move(call), bytes, input.dtype());
}

WorkPtr Communicator::scatter(Tensor output, Tensor input, int root) {
  checkTensor(output, "scatter");
  RM_CHECK_ARG(
      root >= 0 && root < size_,
      fmt::format("scatter on {}: root {} out of range for {} ranks", group_name_, root, size_));
  if (rank_ == root) {
    checkTensor(input, "scatter");
    RM_CHECK_ARG(output.dtype() == input.dtype() && input.numel() == output.numel() * size_,
                 fmt::format("scatter on {}: the root's input must hold {} x {} elements, got {}",
                             group_name_, size_, output.numel(), input.numel()));
  }
  uint64_t bytes = output.nbytes() * static_cast<uint64_t>(size_);
  if (size_ == 1)
    return completedLocally(CommOp::kScatter, bytes, output.dtype(),
                            [&] { output.copyFrom(input); });
  OpCall call{CommOp::kScatter, 0, rank_ == root ? input : Tensor(), output};
  call.peer = root;
  return enqueue(std::move(call), bytes, output.dtype());
}

WorkPtr Communicator::barrier() {
  if (size_ == 1) return completedLocally(CommOp::kBarrier, 0, DType::kU8, [] {});
  return enqueue(OpCall{CommOp::kBarrier}, 0, DType::kU8);
}

WorkPtr Communicator::isend(Tensor tensor, int dst, int tag) {
  checkTensor(tensor, "send");
  RM_CHECK_ARG(dst >= 0 && dst < size_ && dst != rank_,
               fmt::format("send on {}: destination {} is not another rank of {} (this is rank {})",
                           group_name_, dst, size_, rank_));
  RM_CHECK_ARG(tag >= 0, fmt::format("send on {}: tag must be >= 0, got {}", group_name_, tag));
  OpCall call{CommOp::kSend, 0, tensor};
  call.peer = dst;
  call.tag = tag;
  return enqueue(std::move(call), tensor.nbytes(), tensor.dtype());
}

WorkPtr Communicator::irecv(Tensor tensor, int src, int tag) {
  checkTensor(tensor, "recv");
  RM_CHECK_ARG(src >= 0 && src < size_ && src != rank_,
               fmt::format("recv on {}: source {} is not another rank of {} (this is rank {})",
                           group_name_, src, size_, rank_));
  RM_CHECK_ARG(tag >= 0, fmt::format("recv on {}: tag must be >= 0, got {}", group_name_, tag));
  OpCall call{CommOp::kRecv, 0, tensor};
  call.peer = src;
  call.tag = tag;
  return enqueue(std::move(call), tensor.nbytes(), tensor.dtype());
}

// ---------------------------------------------------------------------------------------------
// Sub-groups.

std::unique_ptr<Communicator> Communicator::newGroup(const std::vector<int>& ranks,
                                                     std::string name) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  RM_CHECK_ARG(!ranks.empty() && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end() &&
                   sorted.front() >= 0 && sorted.back() < size_,
               fmt::format("new_group on {}: ranks [{}] must be distinct ranks of 0..{}",
                           group_name_, fmt::join(ranks, ", "), size_ - 1));
  uint64_t index;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    index = ++groups_created_;
  }
  if (name.empty()) name = fmt::format("{}.group{}", group_name_, index);
  auto member = std::find(ranks.begin(), ranks.end(), rank_);
  if (member == ranks.end()) return nullptr;
  int group_rank = static_cast<int>(member - ranks.begin());
  int group_size = static_cast<int>(ranks.size());
  auto store = std::make_shared<PrefixStore>(fmt::format("group{}", index), store_);
  std::unique_ptr<Backend> backend;
  if (group_size > 1)
    backend = backend_->split(store, group_rank, group_size);
  else
    backend = backend_->split(nullptr, 0, 1);
  auto group = std::make_unique<Communicator>(std::move(backend), store, job_store_, group_rank,
                                              group_size, std::move(name), options_);
  group->mesh_dimension_ = mesh_dimension_;
  group->clock_offset_us_ = clock_offset_us_.load();
  group->clock_uncertainty_us_ = clock_uncertainty_us_.load();
  for (int r = 0; r < group_size; ++r) {
    group->world_ranks_[static_cast<size_t>(r)] =
        world_ranks_[static_cast<size_t>(ranks[static_cast<size_t>(r)])];
  }
  return group;
}

}  // namespace ringmaster
