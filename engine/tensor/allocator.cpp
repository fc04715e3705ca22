// The caching allocator and the host's backing memory; CUDA's backing lives in cuda/cuda_runtime.cpp.
#include "tensor/allocator.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/cuda/cuda_runtime.h"

namespace ringmaster {

namespace {

constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeThreshold = size_t{1} << 20;
constexpr size_t kLargeDivisions = 8;  // PyTorch's roundup_power2_divisions
constexpr size_t kHostAlignment = 64;

void* hostAllocate(size_t bytes, int) { return std::aligned_alloc(kHostAlignment, bytes); }
void hostRelease(void* ptr, int) { std::free(ptr); }

DeviceMemoryInfo hostQuery(int) {
  DeviceMemoryInfo info;
  long page = sysconf(_SC_PAGESIZE);
  info.total_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(page);
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0, resident_pages = 0;
  if (statm >> size_pages >> resident_pages) info.used_bytes = resident_pages * page;
  return info;
}

}  // namespace

CachingAllocator::CachingAllocator(Device device, BackingMemory backing)
    : device_(device), backing_(backing) {}

CachingAllocator::~CachingAllocator() {
  // Live blocks at exit belong to static tensors; only the cache is ours to return.
  std::lock_guard lock(mutex_);
  releaseCacheLocked();
}

size_t CachingAllocator::roundSize(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t granule = kSmallGranule;
  if (bytes >= kLargeThreshold) {
    size_t power = kLargeThreshold;  // the largest power of two not above `bytes`
    while (power <= bytes / 2) power *= 2;
    granule = power / kLargeDivisions;
  }
  return (bytes + granule - 1) / granule * granule;
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t size = roundSize(bytes);
  std::lock_guard lock(mutex_);
  stats_.allocations++;
  void* ptr = nullptr;
  if (auto it = cache_.find(size); it != cache_.end()) {
    ptr = it->second;
    cache_.erase(it);
    stats_.cache_hits++;
  } else {
    ptr = backing_.allocate(size, device_.index);
    if (ptr == nullptr && !cache_.empty()) {
      releaseCacheLocked();
      ptr = backing_.allocate(size, device_.index);
    }
    if (ptr == nullptr) {
      RM_THROW(kUnavailable, fmt::format("out of memory on {}: could not allocate {} bytes "
                                         "({} bytes allocated, {} reserved)",
                                         device_.str(), size, stats_.allocated_bytes,
                                         stats_.reserved_bytes));
    }
    stats_.reserved_bytes += size;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  live_.emplace(ptr, size);
  stats_.allocated_bytes += size;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  RM_ENFORCE(it != live_.end(), "freeing a pointer this allocator did not hand out");
  stats_.allocated_bytes -= it->second;
  cache_.emplace(it->second, ptr);
  live_.erase(it);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::resetPeakStats() {
  std::lock_guard lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::emptyCache() {
  std::lock_guard lock(mutex_);
  releaseCacheLocked();
}

void CachingAllocator::releaseCacheLocked() {
  for (auto& [size, ptr] : cache_) {
    backing_.release(ptr, device_.index);
    stats_.reserved_bytes -= size;
  }
  cache_.clear();
}

DeviceMemoryInfo CachingAllocator::deviceMemory() const { return backing_.query(device_.index); }

CachingAllocator& allocatorFor(Device device) {
  if (!device.isCuda()) {
    static CachingAllocator host(Device::cpu(), BackingMemory{hostAllocate, hostRelease, hostQuery});
    return host;
  }
  constexpr int kMaxDevices = 64;
  static std::unique_ptr<CachingAllocator> cuda[kMaxDevices];
  static std::mutex mutex;
  if (!cudaAvailable()) {
    RM_THROW(kUnavailable, fmt::format("{} requested but {}", device.str(),
                                       cuda::kBuiltWithCuda ? "no CUDA device is visible"
                                                            : "this build has no CUDA support"));
  }
  RM_CHECK_ARG(device.index >= 0 && device.index < cudaDeviceCount(),
               fmt::format("{} does not exist ({} CUDA devices)", device.str(), cudaDeviceCount()));
  std::lock_guard lock(mutex);
  if (!cuda[device.index]) {
    cuda[device.index] = std::make_unique<CachingAllocator>(device, cuda::backingMemory());
  }
  return *cuda[device.index];
}

void copyBytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (!dst_device.isCuda() && !src_device.isCuda()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  cuda::copyBytes(dst, dst_device, src, src_device, bytes);
}

}  // namespace ringmaster
