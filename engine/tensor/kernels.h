// Declares the raw kernels of kernels.inc for the host (ringmaster::cpu) and, in CUDA builds, for
// the GPU (ringmaster::cuda). Code above the tensor layer calls ops.h, which dispatches here.
#pragma once

#include <cstdint>

#include "tensor/device.h"  // DType, for the 16-bit kernels

namespace ringmaster::cpu {
#include "tensor/kernels.inc"
}  // namespace ringmaster::cpu

#if RINGMASTER_HAVE_CUDA
namespace ringmaster::cuda {
#include "tensor/kernels.inc"
}  // namespace ringmaster::cuda
#endif
