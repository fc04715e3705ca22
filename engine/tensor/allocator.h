// One caching allocator per device: every tensor's memory comes from here, so the figures a PyTorch
// user knows (memory_allocated, max_memory_allocated, memory_reserved) are exact for the engine.
// Freed blocks go back to a per-size cache instead of to the system; emptyCache() releases them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "tensor/device.h"

namespace ringmaster {

struct MemoryStats {
  uint64_t allocated_bytes = 0;       // bytes in live tensors (rounded block sizes)
  uint64_t peak_allocated_bytes = 0;  // max of allocated_bytes since the last resetPeakStats()
  uint64_t reserved_bytes = 0;        // bytes held from the system: live blocks plus the cache
  uint64_t peak_reserved_bytes = 0;
  uint64_t allocations = 0;           // allocate() calls
  uint64_t cache_hits = 0;            // allocate() calls served from the cache
};

// What the device itself reports: for CUDA, cudaMemGetInfo; for the host, this process's resident
// set against the machine's physical memory.
struct DeviceMemoryInfo {
  uint64_t used_bytes = 0;
  uint64_t total_bytes = 0;
};

// Where blocks really come from. One per device type; the CUDA one lives with the CUDA code.
struct BackingMemory {
  void* (*allocate)(size_t bytes, int device_index);
  void (*release)(void* ptr, int device_index);
  DeviceMemoryInfo (*query)(int device_index);
};

class CachingAllocator {
 public:
  CachingAllocator(Device device, BackingMemory backing);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Never returns null: throws on exhaustion, after retrying once with the cache emptied.
  void* allocate(size_t bytes);
  void deallocate(void* ptr);

  MemoryStats stats() const;
  void resetPeakStats();
  // Releases every cached (unused) block to the system.
  void emptyCache();
  DeviceMemoryInfo deviceMemory() const;
  Device device() const { return device_; }

  // Block size a request is served with: 512-byte granules below 1 MiB; above, an eighth of the
  // request's power of two (PyTorch's roundup_power2_divisions = 8: at most 12.5% unused), so
  // that similarly sized requests of one training step reuse each other's blocks.
  static size_t roundSize(size_t bytes);

 private:
  void releaseCacheLocked();

  Device device_;
  BackingMemory backing_;
  mutable std::mutex mutex_;
  MemoryStats stats_;
  std::unordered_map<void*, size_t> live_;              // pointer -> block size
  std::multimap<size_t, void*> cache_;                  // block size -> free block
};

// The process-wide allocator of a device (created on first use). Throws kUnavailable for CUDA
// devices when the build or the machine has none.
CachingAllocator& allocatorFor(Device device);

// Copies bytes between any two devices.
void copyBytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);

}  // namespace ringmaster
