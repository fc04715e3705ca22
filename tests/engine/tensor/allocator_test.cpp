// The caching allocator's accounting: allocated / peak / reserved as PyTorch reports them, block
// reuse, and emptyCache. Uses private allocators over counting backing memory, so figures are exact.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "tensor/allocator.h"
#include "tensor/tensor.h"

namespace ringmaster {
namespace {

int g_backing_allocations = 0;
int g_backing_releases = 0;

BackingMemory countingBacking() {
  return BackingMemory{
      [](size_t bytes, int) -> void* {
        g_backing_allocations++;
        return std::malloc(bytes);
      },
      [](void* p, int) {
        g_backing_releases++;
        std::free(p);
      },
      [](int) { return DeviceMemoryInfo{1, 2}; }};
}

TEST(CachingAllocator, RoundsSizesToGranules) {
  EXPECT_EQ(CachingAllocator::roundSize(0), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::roundSize(513), 1024u);
  // Above 1 MiB: eighths of the power of two below.
  EXPECT_EQ(CachingAllocator::roundSize(1u << 20), 1u << 20);
  EXPECT_EQ(CachingAllocator::roundSize((1u << 20) + 1), (1u << 20) + (128u << 10));
  EXPECT_EQ(CachingAllocator::roundSize(5u << 20), 5u << 20);
  EXPECT_EQ(CachingAllocator::roundSize((4u << 20) + 4096), (4u << 20) + (512u << 10));
  EXPECT_EQ(CachingAllocator::roundSize((16u << 20) - 1), 16u << 20);
}

TEST(CachingAllocator, CountsAllocatedPeakAndReserved) {
  g_backing_allocations = g_backing_releases = 0;
  CachingAllocator allocator(Device::cpu(), countingBacking());
  void* a = allocator.allocate(1000);  // 1024
  void* b = allocator.allocate(100);   // 512
  MemoryStats s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes, 1536u);
  EXPECT_EQ(s.reserved_bytes, 1536u);
  allocator.deallocate(a);
  s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes, 512u);
  EXPECT_EQ(s.peak_allocated_bytes, 1536u);
  EXPECT_EQ(s.reserved_bytes, 1536u);  // the freed block stays cached

  void* c = allocator.allocate(900);  // rounds to 1024: served from the cache
  EXPECT_EQ(c, a);
  s = allocator.stats();
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.allocations, 3u);
  EXPECT_EQ(g_backing_allocations, 2);

  allocator.deallocate(b);
  allocator.deallocate(c);
  allocator.emptyCache();
  s = allocator.stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.peak_reserved_bytes, 1536u);
  EXPECT_EQ(g_backing_releases, 2);

  allocator.resetPeakStats();
  EXPECT_EQ(allocator.stats().peak_allocated_bytes, 0u);
  EXPECT_EQ(allocator.deviceMemory().total_bytes, 2u);
}

TEST(CachingAllocator, RejectsForeignPointers) {
  CachingAllocator allocator(Device::cpu(), countingBacking());
  int on_stack = 0;
  EXPECT_THROW(allocator.deallocate(&on_stack), Error);
}

TEST(CachingAllocator, ReportsOutOfMemoryWithFigures) {
  CachingAllocator allocator(
      Device::cpu(), BackingMemory{[](size_t, int) -> void* { return nullptr; }, [](void*, int) {},
                                   [](int) { return DeviceMemoryInfo{}; }});
  try {
    allocator.allocate(4096);
    FAIL() << "expected out of memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
    EXPECT_NE(e.message().find("out of memory on cpu"), std::string::npos) << e.message();
  }
}

TEST(CachingAllocator, IsSafeUnderConcurrentUse) {
  CachingAllocator allocator(Device::cpu(), countingBacking());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&allocator, t] {
      for (int i = 0; i < 2000; ++i) {
        void* p = allocator.allocate(64 * (1 + (i + t) % 7));
        allocator.deallocate(p);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(allocator.stats().allocated_bytes, 0u);
  EXPECT_EQ(allocator.stats().allocations, 8000u);
}

TEST(HostAllocator, TensorsAreAccountedAndReturned) {
  CachingAllocator& host = allocatorFor(Device::cpu());
  const uint64_t before = host.stats().allocated_bytes;
  {
    Tensor t = Tensor::empty({1024, 1024});  // 4 MiB
    EXPECT_EQ(host.stats().allocated_bytes, before + (4u << 20));
    Tensor shared = t;  // shares storage: no new allocation
    EXPECT_EQ(host.stats().allocated_bytes, before + (4u << 20));
  }
  EXPECT_EQ(host.stats().allocated_bytes, before);
  DeviceMemoryInfo info = host.deviceMemory();
  EXPECT_GT(info.total_bytes, 0u);
  EXPECT_GT(info.used_bytes, 0u);
  EXPECT_LT(info.used_bytes, info.total_bytes);
}

}  // namespace
}  // namespace ringmaster
