// The CUDA runtime entry points of cuda_runtime.h: device count and names, the backing memory of
// the CUDA caching allocator, copies, synchronisation. The runtime is linked statically (it opens
// the driver at its first call); cuBLAS is opened in cublas_library.cpp, caching lives in
// allocator.cpp, the math in kernels.cu.
#include "tensor/cuda/cuda_runtime.h"

#include <cuda_runtime_api.h>

#include "core/error.h"

namespace ringmaster::cuda {

namespace {

// Makes `device_index` the calling thread's current device, and leaves it so. The raw kernels of
// kernels.inc take no device and run on the current one, so a thread that allocates or copies a
// tensor on cuda:N goes on launching its kernels on cuda:N.
void useDevice(int device_index) {
  int current = -1;
  RM_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_index) RM_CUDA_CHECK(cudaSetDevice(device_index));
}

// Switches to a device for one call and back, for calls that only look (memory info, waiting).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device_index) {
    RM_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_index) RM_CUDA_CHECK(cudaSetDevice(device_index));
  }
  // Unchecked: a destructor cannot throw, and setting back a device that was current a moment
  // ago only fails if the context is already broken, which the next checked call reports.
  ~DeviceGuard() { (void)cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Returns null when the device is out of memory, so that the caching allocator can empty its cache
// and retry; any other failure is an error.
void* deviceAllocate(size_t bytes, int device_index) {
  useDevice(device_index);
  void* ptr = nullptr;
  cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it, so the next checked call does not report it again
    return nullptr;
  }
  RM_CUDA_CHECK(status);
  return ptr;
}

void deviceRelease(void* ptr, int device_index) {
  // The allocators are static objects: at process exit the runtime may be unloaded before they
  // release their cache, and the driver reclaims the memory anyway.
  cudaError_t status = cudaSetDevice(device_index);
  if (status == cudaErrorCudartUnloading) return;
  RM_CUDA_CHECK(status);
  status = cudaFree(ptr);
  if (status == cudaErrorCudartUnloading) return;
  RM_CUDA_CHECK(status);
}

DeviceMemoryInfo deviceQuery(int device_index) {
  DeviceGuard guard(device_index);
  size_t free_bytes = 0, total_bytes = 0;
  RM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceMemoryInfo{total_bytes - free_bytes, total_bytes};
}

}  // namespace

int deviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // No driver, a driver older than the runtime, or no device: all mean "no CUDA" here.
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

BackingMemory backingMemory() {
  return BackingMemory{deviceAllocate, deviceRelease, deviceQuery};
}

void copyBytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  // With unified addressing cudaMemcpyDefault works out the direction from the pointers. The copy
  // is issued on the default stream, after every kernel queued there.
  useDevice(dst_device.isCuda() ? dst_device.index : src_device.index);
  RM_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

std::string deviceName(int device_index) {
  cudaDeviceProp properties{};
  RM_CUDA_CHECK(cudaGetDeviceProperties(&properties, device_index));
  return properties.name;
}

void synchronize(int device_index) {
  DeviceGuard guard(device_index);
  RM_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace ringmaster::cuda
