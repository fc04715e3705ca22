// cuBLAS as the CUDA kernels see it, private to engine/tensor/cuda: the library opened at the first
// matrix product on a CUDA device (never at start-up, so that a process on the CPU does not map
// it), the functions the kernels call, the per-device handle, and RM_CUBLAS_CHECK. Only the CUDA
// build includes this header.
#pragma once

#include <cublas_v2.h>

namespace ringmaster::cuda {

// The cuBLAS functions the kernels call, by the names the library exports (cublas_v2.h maps
// cublasCreate to cublasCreate_v2 and cublasSgemm to cublasSgemm_v2).
struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetMathMode) setMathMode = nullptr;
  decltype(&cublasGetStatusString) getStatusString = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemmStridedBatched = nullptr;
  // The exported functions that take a cublasComputeType_t. C++ also sees inline overloads that
  // take a cudaDataType, so decltype cannot name these two: their types are spelled out.
  cublasStatus_t (*gemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                           int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                           cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                         int, int, const void*, const void*, cudaDataType, int,
                                         long long, const void*, cudaDataType, int, long long,
                                         const void*, void*, cudaDataType, int, long long, int,
                                         cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

// cuBLAS, opened and resolved by the first call (thread safe); kUnavailable, with the message of
// SharedLibrary::open, when it cannot be, and the next call tries again.
const CublasLibrary& cublas();

// The handle of the calling thread's current device (cudaGetDevice): created on first use (thread
// safe), bound to the default stream, never destroyed.
cublasHandle_t cublasHandle();

}  // namespace ringmaster::cuda

#define RM_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                        \
    cublasStatus_t rm_status_ = (call);                                                       \
    if (rm_status_ != CUBLAS_STATUS_SUCCESS) {                                                \
      RM_THROW(kCuda, fmt::format("{} failed: {}", #call,                                     \
                                  ::ringmaster::cuda::cublas().getStatusString(rm_status_))); \
    }                                                                                         \
  } while (0)
