// The CUDA runtime as the rest of the engine sees it: device count, the backing memory of the CUDA
// caching allocator, copies, and the checking macros. Compiles to "no devices" without CUDA.
#pragma once

#include <cstddef>
#include <string>

#include "tensor/allocator.h"

namespace ringmaster::cuda {

#if RINGMASTER_HAVE_CUDA
inline constexpr bool kBuiltWithCuda = true;
#else
inline constexpr bool kBuiltWithCuda = false;
#endif

// Visible CUDA devices; 0 in a build without CUDA or on a machine without a driver or a device.
int deviceCount();
BackingMemory backingMemory();
void copyBytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// The device's product name, from cudaGetDeviceProperties.
std::string deviceName(int device_index);
// Waits for all work on the device.
void synchronize(int device_index);

}  // namespace ringmaster::cuda

#if RINGMASTER_HAVE_CUDA && defined(RINGMASTER_CUDA_CHECKS)
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "core/error.h"

#define RM_CUDA_CHECK(call)                                                                     \
  do {                                                                                          \
    cudaError_t rm_status_ = (call);                                                            \
    if (rm_status_ != cudaSuccess) {                                                            \
      RM_THROW(kCuda, fmt::format("{} failed: {}", #call, cudaGetErrorString(rm_status_)));     \
    }                                                                                           \
  } while (0)

#define RM_CUBLAS_CHECK(call)                                                                   \
  do {                                                                                          \
    cublasStatus_t rm_status_ = (call);                                                         \
    if (rm_status_ != CUBLAS_STATUS_SUCCESS) {                                                  \
      RM_THROW(kCuda, fmt::format("{} failed: {}", #call, cublasGetStatusString(rm_status_)));  \
    }                                                                                           \
  } while (0)
#endif
