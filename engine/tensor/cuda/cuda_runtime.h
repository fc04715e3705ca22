// The CUDA runtime as the rest of the engine sees it: device count, the backing memory of the CUDA
// caching allocator, copies, opening cuBLAS, and RM_CUDA_CHECK. Compiles to "no devices" without
// CUDA.
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

// Opens cuBLAS and resolves every function the kernels call, which the first matrix product on a
// CUDA device does once; returns the file opened. Needs no device. kUnavailable when it cannot:
// the message names the library, the loader's reason (dlerror) and what to install. The build
// links neither cuBLAS nor the shared CUDA runtime, so a process on the CPU maps neither.
std::string loadCublasLibrary();

}  // namespace ringmaster::cuda

#if RINGMASTER_HAVE_CUDA && defined(RINGMASTER_CUDA_CHECKS)
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "core/error.h"

#define RM_CUDA_CHECK(call)                                                                 \
  do {                                                                                      \
    cudaError_t rm_status_ = (call);                                                        \
    if (rm_status_ != cudaSuccess) {                                                        \
      RM_THROW(kCuda, fmt::format("{} failed: {}", #call, cudaGetErrorString(rm_status_))); \
    }                                                                                       \
  } while (0)
#endif
