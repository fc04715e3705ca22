// The FLOP counts and the peak table of throughput.h.
#include "train/throughput.h"

#include <array>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

namespace {

struct DevicePeak {
  std::string_view name;  // a part of deviceName() that identifies the model
  double fp32_tflops, bf16_tflops;
};

// Dense peaks in TFLOP/s, from NVIDIA's datasheets (the sparsity figures halved back):
// - H100 SXM and PCIe: "NVIDIA H100 Tensor Core GPU" datasheet (nvidia.com/en-us/data-center/
//   h100): FP32 67 / 51 TFLOPS, BF16 Tensor Core 1,979 / 1,513 TFLOPS with sparsity.
// - H200 (SXM): nvidia.com/en-us/data-center/h200: FP32 67 TFLOPS, BF16 Tensor Core 1,979 TFLOPS
//   with sparsity.
// - A100 (40 GB and 80 GB, SXM and PCIe alike): "NVIDIA A100 Tensor Core GPU" datasheet: FP32
//   19.5 TFLOPS, BF16 Tensor Core 312 TFLOPS (dense).
// The H100 and H200 NVL parts run at other clocks and are left unknown rather than guessed.
constexpr std::array kPeaks = {
    DevicePeak{"H100 PCIe", 51, 756.5},
    DevicePeak{"H100 80GB HBM3", 67, 989.5},  // the SXM part's name
    DevicePeak{"H100 SXM", 67, 989.5},
    DevicePeak{"H200", 67, 989.5},
    DevicePeak{"A100", 19.5, 312},
};

}  // namespace

std::optional<double> knownPeakFlops(std::string_view device_name, MatmulPrecision precision) {
  if (device_name.find("NVIDIA") == std::string_view::npos ||
      device_name.find("NVL") != std::string_view::npos)
    return std::nullopt;
  for (const DevicePeak& peak : kPeaks) {
    if (device_name.find(peak.name) == std::string_view::npos) continue;
    return 1e12 * (precision == MatmulPrecision::kFp32 ? peak.fp32_tflops : peak.bf16_tflops);
  }
  return std::nullopt;
}

double trainingFlopsPerToken(const ModelDescription& model, int64_t tokens_per_sample) {
  RM_CHECK_ARG(tokens_per_sample > 0,
               fmt::format("tokens per sample must be positive, got {}", tokens_per_sample));
  return 3.0 * static_cast<double>(model.flops_per_sample) / static_cast<double>(tokens_per_sample);
}

std::optional<double> modelFlopsUtilisation(double flops_per_token, double tokens_per_s,
                                            std::optional<double> peak_flops) {
  if (!peak_flops || *peak_flops <= 0) return std::nullopt;
  return flops_per_token * tokens_per_s / *peak_flops;
}

}  // namespace ringmaster
