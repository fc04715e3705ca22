// Training throughput as the step event reports it: tokens per sample, training FLOPs per token,
// the peak FLOP/s of the CUDA devices whose datasheets we know, and model FLOPs utilisation (MFU,
// PaLM's appendix B: the model's FLOPs per token times tokens/s over the peak).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "nn/model.h"

namespace ringmaster {

// The precision the matrix products run in, which picks a datasheet's column.
enum class MatmulPrecision {
  kFp32,  // FP32 on the CUDA cores (no TF32)
  kBf16,  // BF16 / FP16 on the tensor cores, dense (not the 2:4 sparsity figure)
};

// The peak FLOP/s of one device by its name (deviceName(), "NVIDIA H100 80GB HBM3"), from
// NVIDIA's datasheets: H100 SXM, H100 PCIe, H200 (SXM) and A100 (SXM and PCIe share theirs).
// nullopt for any other device, the host's processors included: no figure is guessed.
std::optional<double> knownPeakFlops(std::string_view device_name, MatmulPrecision precision);

// Training FLOPs per token: 3 x the forward's FLOPs per sample (backward = 2 x forward) over the
// tokens of a sample. For the GPT, whose description counts 2N + 4*layers*context*dim forward
// FLOPs per token, this is PaLM's 6N + 12*layers*context*dim.
double trainingFlopsPerToken(const ModelDescription& model, int64_t tokens_per_sample);

// tokens_per_s x flops_per_token over the peak; nullopt without a peak.
std::optional<double> modelFlopsUtilisation(double flops_per_token, double tokens_per_s,
                                            std::optional<double> peak_flops);

}  // namespace ringmaster
