// Gradient clipping for a model spread over ranks (FSDP shards, pipeline stages): each rank holds
// part of the parameters, and the norm that clip_grad_norm_ uses is the whole model's.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "nn/module.h"

namespace ringmaster {

// Sums the local parameters' squared gradient norms across `comm`'s ranks (collective), scales
// every local gradient as clip_grad_norm_ does for that total, and returns the total norm.
// `copies`: local copies of parameters another rank counts (a pipeline's tied parameters), scaled
// like the rest but not counted again.
// clip_grad_norm_ over a model spread over `comm`'s ranks however it is split (the device mesh):
// `counted` holds each gradient element of the model on exactly one rank; every gradient of
// `scaled` is clipped by the total norm, which it returns. Collective.
double clipGradNormCountedOnce(const std::vector<Tensor>& counted,
                               const std::vector<NamedParameter>& scaled, Communicator& comm,
                               double max_norm);
double clipDistributedGradNorm(const std::vector<NamedParameter>& local, Communicator& comm,
                               double max_norm, const std::vector<NamedParameter>& copies = {});

}  // namespace ringmaster
