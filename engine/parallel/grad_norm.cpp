// The whole-model gradient norm from the ranks' parts, and clipping by it.
#include "parallel/grad_norm.h"

#include <cmath>

#include "optim/optimizer.h"

namespace ringmaster {

double clipDistributedGradNorm(const std::vector<NamedParameter>& local, Communicator& comm,
                               double max_norm, const std::vector<NamedParameter>& copies) {
  const double local_norm = gradNorm(local);
  Tensor total =
      Tensor::fromVector({static_cast<float>(local_norm * local_norm)}, {1}, comm.device());
  comm.allReduce(total, ReduceOp::sum())->wait();
  const double norm = std::sqrt(static_cast<double>(total.toFloatVector()[0]));
  clipGradientsGivenNorm(local, norm, max_norm);
  clipGradientsGivenNorm(copies, norm, max_norm);
  return norm;
}

}  // namespace ringmaster
