// The ranks' agreement to stop between steps: a stop asked for on any rank (SIGINT, SIGTERM)
// stops every rank after the same step, since a rank that stopped alone would leave the others
// waiting in a collective. It costs no blocking collective per step: the flags ride the step's own
// gradient reduction where the strategy's spans the world (DDP: parallel/ddp.h's
// StopFlagCarrier), else an asynchronous all-reduce started before a step and waited before the
// next, behind that step's work, in a group of every rank of its own, so that it never queues in
// front of the step's collectives. Either way a request polled before step N stops the ranks
// after step N; with one rank, before it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "comm/communicator.h"
#include "parallel/ddp.h"  // StopFlagCarrier

namespace ringmaster {

class StopAgreement {
 public:
  // `stop_requested` is this rank's wish, polled once before each step; `world` the job's
  // communicator (nullptr or one rank: no agreement); `carrier` the strategy's ride, if any.
  // Without one, every rank of `world` must construct it at the same point (it makes a group).
  StopAgreement(std::function<bool()> stop_requested, Communicator* world,
                StopFlagCarrier* carrier);
  StopAgreement(const StopAgreement&) = delete;
  StopAgreement& operator=(const StopAgreement&) = delete;

  // Before step `step` (steps in order from `first`): whether every rank stops now. Polls this
  // rank's wish for the ranks' next verdict. Before the first step the ranks agree at once (one
  // blocking all-reduce for the whole run), so that a stop asked for during set-up runs no step.
  bool stopBeforeStep(int64_t step, int64_t first);
  // After the loop: waits for the flags still in flight (every rank started them), so that no
  // operation of the agreement outlives the loop.
  void finish();

 private:
  // This rank's flag summed over the world (in the asynchronous ride's group where there is one),
  // started now; and its verdict, waited for.
  void startFlagReduction(bool here);
  bool waitFlagReduction();

  std::function<bool()> stop_requested_;
  Communicator* world_ = nullptr;  // nullptr: one rank, nothing to agree
  StopFlagCarrier* carrier_ = nullptr;
  // The asynchronous ride's group: every rank of the world (nullptr with one rank or a carrier).
  std::unique_ptr<Communicator> group_;
  Tensor flag_;   // the asynchronous ride's flag in flight
  WorkPtr work_;  // its all-reduce; null when none is in flight
};

}  // namespace ringmaster
