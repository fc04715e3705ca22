// The cuBLAS handle of a CUDA device, private to engine/tensor/cuda: created on first use (thread
// safe), bound to the default stream, never destroyed. Only the CUDA build includes this header.
#pragma once

#include <cublas_v2.h>

namespace ringmaster::cuda {

// The handle of the calling thread's current device (cudaGetDevice).
cublasHandle_t cublasHandle();

}  // namespace ringmaster::cuda
