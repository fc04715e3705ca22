// The ranks' agreement to stop between steps, riding the gradients or running a step behind
// (train/stop_agreement.h).
#include "train/stop_agreement.h"

#include <numeric>
#include <vector>

#include "core/error.h"

namespace ringmaster {

StopAgreement::StopAgreement(std::function<bool()> stop_requested, Communicator* world,
                             StopFlagCarrier* carrier)
    : stop_requested_(std::move(stop_requested)) {
  if (world == nullptr || world->size() == 1) return;
  world_ = world;
  carrier_ = carrier;
  if (carrier_ != nullptr) return;
  std::vector<int> everyone(static_cast<size_t>(world->size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  group_ = world->newGroup(everyone, world->groupName() + ".stop");
  // The flags' all-reduce is started before a step and waited for before the next: it must not
  // run on this thread, which would then wait for every rank to reach the step.
  group_->keepSmallCollectivesAsynchronous();
  // The group inherits the world's mesh dimension: its all-reduces show under the dimension the
  // world spans (dp for DDP / FSDP, pp for a pipeline), not as a dimension of their own.
}

bool StopAgreement::stopBeforeStep(int64_t step, int64_t first) {
  if (world_ == nullptr) return stop_requested_();
  if (step == first) {
    startFlagReduction(stop_requested_());
    if (waitFlagReduction()) return true;
  } else if (carrier_ != nullptr) {
    // The flags the previous step's gradient reduction summed.
    if (carrier_->anyRankOfferedStop()) return true;
  } else if (waitFlagReduction()) {
    return true;
  }
  // The next verdict: this step's gradients carry the flag, or it is summed while the step runs.
  if (carrier_ != nullptr)
    carrier_->offerStopFlag(stop_requested_());
  else
    startFlagReduction(stop_requested_());
  return false;
}

void StopAgreement::finish() {
  if (work_) waitFlagReduction();
}

void StopAgreement::startFlagReduction(bool here) {
  RM_ENFORCE(!work_, "stop agreement: a flag reduction is already in flight");
  Communicator& ranks = group_ ? *group_ : *world_;
  flag_ = Tensor::fromInts({here ? 1 : 0}, {1}, ranks.device());
  work_ = ranks.allReduce(flag_, ReduceOp::max());
}

bool StopAgreement::waitFlagReduction() {
  RM_ENFORCE(work_ != nullptr, "stop agreement: no flag reduction in flight");
  WorkPtr work = std::move(work_);
  work_ = nullptr;
  work->wait();
  return flag_.toFloatVector()[0] != 0;
}

}  // namespace ringmaster
