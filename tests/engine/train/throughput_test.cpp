// Tests of the throughput figures (train/throughput.h): the peak table by device name, training
// FLOPs per token and MFU, which is absent rather than guessed without a peak.
#include <gtest/gtest.h>

#include "core/error.h"
#include "nn/model.h"
#include "train/throughput.h"

namespace ringmaster {
namespace {

TEST(Throughput, KnownPeaksByDeviceName) {
  using P = MatmulPrecision;
  EXPECT_EQ(knownPeakFlops("NVIDIA H100 80GB HBM3", P::kFp32), 67e12);
  EXPECT_EQ(knownPeakFlops("NVIDIA H100 80GB HBM3", P::kBf16), 989.5e12);
  EXPECT_EQ(knownPeakFlops("NVIDIA H100 PCIe", P::kFp32), 51e12);
  EXPECT_EQ(knownPeakFlops("NVIDIA H100 PCIe", P::kBf16), 756.5e12);
  EXPECT_EQ(knownPeakFlops("NVIDIA H200", P::kBf16), 989.5e12);
  EXPECT_EQ(knownPeakFlops("NVIDIA A100-SXM4-80GB", P::kFp32), 19.5e12);
  EXPECT_EQ(knownPeakFlops("NVIDIA A100 80GB PCIe", P::kBf16), 312e12);
  // Unknown: other parts, the NVL variants, the host's processors.
  EXPECT_FALSE(knownPeakFlops("NVIDIA H100 NVL", P::kFp32));
  EXPECT_FALSE(knownPeakFlops("NVIDIA GeForce RTX 4090", P::kFp32));
  EXPECT_FALSE(knownPeakFlops("Intel(R) Xeon(R) Platinum 8480+", P::kFp32));
  EXPECT_FALSE(knownPeakFlops("", P::kFp32));
}

TEST(Throughput, TrainingFlopsPerTokenAndMfu) {
  ModelDescription model;
  model.flops_per_sample = 2 * 1000 * 16;  // a sample of 16 tokens, 2N forward FLOPs each
  EXPECT_EQ(trainingFlopsPerToken(model, 16), 6 * 1000);
  EXPECT_THROW(trainingFlopsPerToken(model, 0), Error);
  EXPECT_DOUBLE_EQ(*modelFlopsUtilisation(6000, 1e6, 12e9), 0.5);
  EXPECT_FALSE(modelFlopsUtilisation(6000, 1e6, std::nullopt));
}

}  // namespace
}  // namespace ringmaster
