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

// adamStep over `count` tensors in one kernel launch (PyTorch's fused multi-tensor Adam): tensor
// i has sizes[i] elements at params[i], grads[i], exp_avgs[i] and exp_avg_sqs[i] (host arrays of
// device pointers). Each element gets adamStep's arithmetic, bit for bit.
void adamStepMulti(float* const* params, const float* const* grads, float* const* exp_avgs,
                   float* const* exp_avg_sqs, const int64_t* sizes, int64_t count, float lr,
                   float beta1, float beta2, float eps, float weight_decay, int64_t step,
                   bool decoupled);
// sgdStep over `count` tensors in one kernel launch; momentum_buffers may be null when momentum is
// 0.
void sgdStepMulti(float* const* params, const float* const* grads, float* const* momentum_buffers,
                  const int64_t* sizes, int64_t count, float lr, float momentum, float dampening,
                  float weight_decay, bool nesterov, bool first_step);
}  // namespace ringmaster::cuda
#endif
