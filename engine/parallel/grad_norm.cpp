// The whole-model gradient norm from the ranks' parts, and clipping by it.
#include "parallel/grad_norm.h"

#include <cmath>

#include "optim/optimizer.h"
#include "tensor/ops.h"

namespace ringmaster {

double clipGradNormCountedOnce(const std::vector<Tensor>& counted,
                               const std::vector<NamedParameter>& scaled, Communicator& comm,
                               double max_norm) {
  double local = 0;
  for (const Tensor& grad : counted) local += ops::sumSquares(grad);
  Tensor total = Tensor::fromVector({static_cast<float>(local)}, {1}, comm.device());
  comm.allReduce(total, ReduceOp::sum())->wait();
  const double norm = std::sqrt(static_cast<double>(total.toFloatVector()[0]));
  clipGradientsGivenNorm(scaled, norm, max_norm);
  return norm;
}

double clipDistributedGradNorm(const std::vector<NamedParameter>& local, Communicator& comm,
                               double max_norm, const std::vector<NamedParameter>& copies) {
  std::vector<Tensor> counted;
  for (const NamedParameter& p : local) counted.push_back(p.parameter->grad);
  std::vector<NamedParameter> scaled = local;
  scaled.insert(scaled.end(), copies.begin(), copies.end());
  return clipGradNormCountedOnce(counted, scaled, comm, max_norm);
}

}  // namespace ringmaster
