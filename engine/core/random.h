// Counter-based random numbers: the n-th draw of a stream depends only on (seed, n), so CPU and CUDA
// produce identical dropout masks and initialisations, and any draw can be reproduced on its own.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define RM_HOST_DEVICE __host__ __device__
#else
#define RM_HOST_DEVICE
#endif

namespace ringmaster {

// SplitMix64's finaliser: a bijective 64-bit mix with good avalanche.
RM_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits: exact in float32.
RM_HOST_DEVICE inline float uniformFloat(uint64_t seed, uint64_t counter) {
  uint64_t bits = mix64(mix64(seed) ^ counter);
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// Uniform in [0, 1) with 53 random bits.
RM_HOST_DEVICE inline double uniformDouble(uint64_t seed, uint64_t counter) {
  uint64_t bits = mix64(mix64(seed) ^ counter);
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

// A sequential stream over the counter-based generator, for host-side code (data, shuffles).
class Rng {
 public:
  explicit Rng(uint64_t seed) : seed_(seed) {}
  uint64_t nextU64() { return mix64(mix64(seed_) ^ counter_++); }
  double nextDouble() { return uniformDouble(seed_, counter_++); }
  // Uniform in [low, high).
  double uniform(double low, double high) { return low + (high - low) * nextDouble(); }
  // Standard normal by Box-Muller.
  double normal() {
    double u1 = nextDouble(), u2 = nextDouble();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Uniform integer in [0, bound) without modulo bias (Lemire's method).
  uint64_t below(uint64_t bound) {
    unsigned __int128 product = static_cast<unsigned __int128>(nextU64()) * bound;
    auto low = static_cast<uint64_t>(product);
    if (low < bound) {
      uint64_t threshold = -bound % bound;
      while (low < threshold) {
        product = static_cast<unsigned __int128>(nextU64()) * bound;
        low = static_cast<uint64_t>(product);
      }
    }
    return static_cast<uint64_t>(product >> 64);
  }

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

}  // namespace ringmaster
