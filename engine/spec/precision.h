// The floating-point formats a job computes and communicates in: train.precision (autocast),
// strategy.reduce_dtype (gradient reduction) and strategy.param_dtype (FSDP's all-gather), as
// torch.autocast and FSDP's MixedPrecision name them. fromString / enumNames: spec/job_spec.h.
#pragma once

#include <string_view>

#include "tensor/device.h"

namespace ringmaster {

enum class Precision { kFp32, kBf16, kFp16 };

// "fp32", "bf16", "fp16".
std::string_view toString(Precision value);
// The tensor element type of a precision: F32, BF16, F16.
DType precisionDType(Precision value);

}  // namespace ringmaster
