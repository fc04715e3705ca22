// The GPT on CUDA against the same GPT on the host: one forward (logits, per-token loss) and
// backward (every parameter's gradient, by name) of a small model built on each device, with and
// without biases, with and without dropout (its masks are counter-based and equal on both), in
// fp32 and under bf16 and fp16 autocast (train.precision). Without CUDA in the build, or without a
// device, the tests skip and say so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/random.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "tensor/cuda/cuda_runtime.h"
#include "tensor/tensor.h"

namespace ringmaster {
namespace {

// A whole network's result is compared as max |cuda - host| / max |host| over the tensor. Each
// op's two sides agree within a few roundings of its own scale (tests/engine/tensor/
// cuda_kernels_test.cpp: about 1e-5 for the transcendental ones, (k + 3) 2^-23 for a k-term dot
// product, here k <= 4 * dim = 48); at initialisation (weights N(0, 0.02)) the blocks are well
// conditioned, so two blocks of about a dozen ops each compose to a few 1e-5 at most. 2e-4 keeps a
// margin; a wrong index, transposition or mask is off by O(1).
constexpr double kNetworkTolerance = 2e-4;
// Under autocast both sides form the same exact products of 16-bit operands and round fp32 sums
// to 16 bits, but cuBLAS and OpenBLAS add in different orders: a sum within an fp32 ulp of a
// rounding boundary rounds to the other 16-bit neighbour (2^-8 relative in bf16, 2^-11 in fp16),
// which later ops carry on. As in gpt_reference_test.cpp against PyTorch (measured there: 1.3e-3
// bf16, 2.0e-3 fp16 at worst), a few such ulps: 2e-2 (bf16) and 1e-2 (fp16: without loss
// scaling the gradients reaching the first block are in its subnormal range).
double toleranceFor(DType precision) {
  return precision == DType::kBF16 ? 2e-2 : precision == DType::kF16 ? 1e-2 : kNetworkTolerance;
}

// Compares a CUDA result with the host's (see kNetworkTolerance) and prints the error. The host's
// value must not be all zeros: a gradient that never arrives would otherwise compare equal.
void expectClose(const std::string& what, const Tensor& on_cuda, const Tensor& on_cpu,
                 double tolerance) {
  ASSERT_TRUE(on_cuda.device().isCuda()) << what;
  ASSERT_EQ(on_cuda.shape(), on_cpu.shape()) << what;
  const std::vector<float> got = on_cuda.toFloatVector();
  const std::vector<float> want = on_cpu.toFloatVector();
  double max_abs = 0.0, max_diff = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(static_cast<double>(want[i])));
    const double diff = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(diff <= max_diff)) max_diff = diff;  // NaN propagates
  }
  ASSERT_GT(max_abs, 0.0) << what << " is all zeros on the host";
  const double error = max_diff / max_abs;
  std::printf("  %-50s max error / max value %.2e (tolerance %.0e)\n", what.c_str(), error,
              tolerance);
  EXPECT_LE(error, tolerance) << what;
}

class GptOnCuda : public ::testing::TestWithParam<GptConfig> {
 protected:
  void SetUp() override {
    if (!cudaAvailable()) {
      GTEST_SKIP() << "no CUDA device visible: "
                   << (cuda::kBuiltWithCuda
                           ? "the driver reports none (no GPU, no driver, or CUDA_VISIBLE_DEVICES)"
                           : "this build has no CUDA support (configure with the CUDA toolkit)");
    }
  }
};

// One forward and backward of `config` on each device under `precision`'s autocast.
void expectDevicesAgree(const GptConfig& config, DType precision) {
  const double tolerance = toleranceFor(precision);
  const Device gpu = Device::cuda(0);
  std::unique_ptr<Sequential> on_cpu = buildGpt(config);
  std::unique_ptr<Sequential> on_cuda = buildGpt(config, gpu);
  setAutocast(*on_cpu, precision);
  setAutocast(*on_cuda, precision);
  std::vector<NamedParameter> cpu_params = on_cpu->namedParameters();
  std::vector<NamedParameter> cuda_params = on_cuda->namedParameters();
  ASSERT_EQ(cuda_params.size(), cpu_params.size());
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    ASSERT_EQ(cuda_params[i].name, cpu_params[i].name);
    EXPECT_TRUE(cuda_params[i].parameter->value.device().isCuda()) << cpu_params[i].name;
    // The same seed gives the same weights on either device (drawn on the host).
    EXPECT_EQ(cuda_params[i].parameter->value.toFloatVector(),
              cpu_params[i].parameter->value.toFloatVector())
        << cpu_params[i].name;
  }

  const int64_t batch = 3, tokens = config.context;
  Rng rng(config.seed + 1);
  std::vector<int32_t> ids(static_cast<size_t>(batch * tokens)),
      targets(static_cast<size_t>(batch * tokens));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.below(config.vocab_size));
  for (int32_t& t : targets) t = static_cast<int32_t>(rng.below(config.vocab_size));
  const Tensor cpu_ids = Tensor::fromInts(ids, {batch, tokens});
  const Tensor cpu_targets = Tensor::fromInts(targets, {batch * tokens});

  struct Pass {
    Tensor logits;
    double loss;
  };
  // One training forward and backward: per-token cross-entropy, the mean over every token.
  const auto run = [&](Sequential& model, Device device) {
    model.zeroGrad();
    SoftmaxCrossEntropy loss_fn;
    const Tensor logits = model.forward(cpu_ids.to(device));
    const Tensor flat = logits.view({batch * tokens, config.vocab_size});
    const double loss = loss_fn.forward(flat, cpu_targets.to(device));
    model.backward(loss_fn.backward().view(logits.shape()));
    return Pass{logits, loss};
  };
  const Pass host = run(*on_cpu, Device::cpu());
  const Pass device = run(*on_cuda, gpu);

  ASSERT_EQ(host.logits.shape(), (Shape{batch, tokens, config.vocab_size}));
  expectClose("logits", device.logits, host.logits, tolerance);
  const double loss_error = std::abs(device.loss - host.loss) / std::abs(host.loss);
  std::printf("  %-50s relative error %.2e (cuda %.7f, host %.7f)\n", "loss", loss_error,
              device.loss, host.loss);
  EXPECT_LE(loss_error, tolerance);
  for (size_t i = 0; i < cpu_params.size(); ++i) {
    expectClose("grad " + cpu_params[i].name, cuda_params[i].parameter->grad,
                cpu_params[i].parameter->grad, tolerance);
  }
}

TEST_P(GptOnCuda, ForwardAndBackwardMatchTheHost) {
  expectDevicesAgree(GetParam(), DType::kF32);
}

TEST_P(GptOnCuda, ForwardAndBackwardMatchTheHostUnderBf16AndFp16Autocast) {
  for (DType precision : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtypeName(precision));
    std::printf("%s:\n", dtypeName(precision));
    expectDevicesAgree(GetParam(), precision);
  }
}

}  // namespace

// How gtest prints a config (test names and failures), in the spec's words.
void PrintTo(const GptConfig& c, std::ostream* out) {
  *out << fmt::format("vocab_size {} context {} layers {} heads {} dim {} dropout {} bias {}",
                      c.vocab_size, c.context, c.layers, c.heads, c.dim, c.dropout, c.bias);
}

namespace {

GptConfig smallGpt(bool bias, float dropout) {
  // Head width 4, 3 heads, 9 tokens, a vocabulary of 37: nothing a multiple of a warp or a block.
  return GptConfig{.vocab_size = 37,
                   .context = 9,
                   .layers = 2,
                   .heads = 3,
                   .dim = 12,
                   .dropout = dropout,
                   .bias = bias,
                   .seed = 5};
}

INSTANTIATE_TEST_SUITE_P(Configs, GptOnCuda,
                         ::testing::Values(smallGpt(true, 0.0f), smallGpt(false, 0.0f),
                                           smallGpt(true, 0.1f)),
                         [](const ::testing::TestParamInfo<GptConfig>& info) {
                           return fmt::format("{}bias_dropout{}", info.param.bias ? "" : "no",
                                              static_cast<int>(info.param.dropout * 100));
                         });

}  // namespace
}  // namespace ringmaster
