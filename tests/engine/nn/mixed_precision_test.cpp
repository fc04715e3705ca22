// Autocast in the modules (train.precision bf16 / fp16, nn/autocast.h), on the host: a Linear's
// forward and backward against the policy computed here element by element, its zero-bubble split
// equal to its whole backward; what each GPT block keeps for its backward, measured by the caching
// allocator, equal to the description's figure for every precision and smaller in 16-bit (and the
// MLP kinds' likewise); checkpointed blocks' gradients equal to the plain ones under autocast; and
// a short training run whose bf16 loss curve follows fp32's and falls.
// (The GPT against PyTorch in bf16 and fp16: gpt_reference_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/random.h"
#include "nn/autocast.h"
#include "nn/gpt.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/model.h"
#include "optim/optimizer.h"
#include "tensor/allocator.h"

namespace ringmaster {
namespace {

// `values` rounded through `format` (the engine's own conversion, tested in tensor/).
std::vector<float> rounded(const std::vector<float>& values, DType format) {
  const auto n = static_cast<int64_t>(values.size());
  return Tensor::fromVector(values, {n}).toDType(format).toFloatVector();
}

Tensor randomTensor(const Shape& shape, uint64_t seed, double scale = 1.0) {
  std::vector<float> v(shapeNumel(shape));
  Rng rng(seed);
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  return Tensor::fromVector(v, shape);
}

// |a - b| <= ulps of the format at |b| (2^-8 relative for bf16's 8-bit significand, 2^-11 for
// fp16's 11) plus 1e-5 of the largest |b|. The sums here run in double and OpenBLAS's in fp32, in
// other orders: they differ by the fp32 sum's error (about 40 terms x 2^-24 of their magnitudes,
// the absolute term), and a sum that close to a rounding boundary may round to the other
// neighbour: one ulp apart.
void expectWithinUlps(const std::vector<float>& actual, const std::vector<float>& expected,
                      DType format, double ulps, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  const double ulp = format == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  double largest = 0;
  for (float e : expected) largest = std::max(largest, std::abs(double(e)));
  int64_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double bound = ulps * ulp * std::abs(double(expected[i])) + 1e-5 * largest;
    if (std::abs(double(actual[i]) - expected[i]) > bound && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: " << actual[i] << ", expected " << expected[i];
  }
  EXPECT_EQ(bad, 0) << what;
  EXPECT_EQ(actual, rounded(actual, format)) << what << " are not all " << dtypeName(format);
}

// A Linear under autocast, element by element: y = round(x16 W16^T + b16); dW += round(dy16^T
// x16), db += round(sum dy16), dx = round(dy16 W16), all in fp32 tensors holding 16-bit values;
// it keeps x16 (16-bit) for the backward. backwardInput + backwardWeights equal backward.
TEST(MixedPrecision, ALinearFollowsTheAutocastPolicy) {
  const int64_t N = 6, in = 40, out = 24;
  for (DType format : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtypeName(format));
    Linear linear(in, out, 5);
    linear.setComputeDType(format);
    const Tensor x = randomTensor({N, in}, 1);
    const Tensor dy = randomTensor({N, out}, 2, 0.5);
    const std::vector<float> x16 = rounded(x.toFloatVector(), format);
    const std::vector<float> w16 = rounded(linear.weight().value.toFloatVector(), format);
    const std::vector<float> b16 = rounded(linear.bias().value.toFloatVector(), format);
    const std::vector<float> dy16 = rounded(dy.toFloatVector(), format);
    std::vector<float> y(N * out), dw(out * in), db(out), dx(N * in);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < out; ++o) {
        double sum = b16[o];
        for (int64_t i = 0; i < in; ++i) sum += double(x16[n * in + i]) * w16[o * in + i];
        y[n * out + o] = static_cast<float>(sum);
      }
    for (int64_t o = 0; o < out; ++o) {
      double bias = 0;
      for (int64_t n = 0; n < N; ++n) bias += dy16[n * out + o];
      db[o] = static_cast<float>(bias);
      for (int64_t i = 0; i < in; ++i) {
        double sum = 0;
        for (int64_t n = 0; n < N; ++n) sum += double(dy16[n * out + o]) * x16[n * in + i];
        dw[o * in + i] = static_cast<float>(sum);
      }
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < in; ++i) {
        double sum = 0;
        for (int64_t o = 0; o < out; ++o) sum += double(dy16[n * out + o]) * w16[o * in + i];
        dx[n * in + i] = static_cast<float>(sum);
      }

    expectWithinUlps(linear.forward(x).toFloatVector(), rounded(y, format), format, 1, "y");
    EXPECT_EQ(linear.saveContext().at(0).dtype(), format) << "the kept input";
    const std::vector<float> grad_input = linear.backward(dy).toFloatVector();
    expectWithinUlps(grad_input, rounded(dx, format), format, 1, "dx");
    expectWithinUlps(linear.weight().grad.toFloatVector(), rounded(dw, format), format, 1, "dW");
    expectWithinUlps(linear.bias().grad.toFloatVector(), rounded(db, format), format, 1, "db");

    // The zero-bubble split: the same gradients, bit for bit.
    const std::vector<float> w_grad = linear.weight().grad.toFloatVector();
    const std::vector<float> b_grad = linear.bias().grad.toFloatVector();
    linear.zeroGrad();
    linear.forward(x);
    EXPECT_EQ(linear.backwardInput(dy).toFloatVector(), grad_input);
    EXPECT_EQ(linear.weight().grad.toFloatVector(), std::vector<float>(out * in, 0.0f));
    EXPECT_EQ(linear.saveContext().at(1).dtype(), format) << "the kept output gradient";
    linear.backwardWeights();
    EXPECT_EQ(linear.weight().grad.toFloatVector(), w_grad);
    EXPECT_EQ(linear.bias().grad.toFloatVector(), b_grad);
  }
}

// What each block of a GPT keeps between forward and backward, measured as the host allocator's
// live bytes after the block's forward (its output, which the next block keeps, subtracted; its
// input, which the previous block's output is, added back), equals the block's
// activation_bytes_per_sample x batch from describeGpt(config, precision): every tensor here is a
// multiple of the allocator's 512-byte granule, so the two are equal to the byte. 16-bit keeps
// less: the products' operands, q, k, v, the probabilities and the GELU input at 2 bytes.
TEST(MixedPrecision, EachGptBlockKeepsWhatTheDescriptionSaysInEachPrecision) {
  CachingAllocator& host = allocatorFor(Device::cpu());
  auto live = [&] { return static_cast<int64_t>(host.stats().allocated_bytes); };
  for (float dropout : {0.0f, 0.1f}) {
    const GptConfig config{.vocab_size = 64,
                           .context = 64,
                           .layers = 2,
                           .heads = 4,
                           .dim = 64,
                           .dropout = dropout,
                           .seed = 3};
    const int64_t B = 2, T = 64;
    std::vector<int32_t> ids(B * T);
    for (int64_t i = 0; i < B * T; ++i) ids[i] = static_cast<int32_t>((i * 7) % 64);
    std::vector<int64_t> model_total;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(fmt::format("{}, dropout {}", dtypeName(dtype), dropout));
      std::unique_ptr<Sequential> model = buildGpt(config);
      setAutocast(*model, dtype);
      const ModelDescription description = describeGpt(config, dtype);
      ASSERT_EQ(description.blocks.size(), model->size());
      Tensor x = Tensor::fromInts(ids, {B, T});
      int64_t total = 0;
      for (size_t m = 0; m < model->size(); ++m) {
        const int64_t before = live();
        Tensor y = model->child(m).forward(x);
        const int64_t kept =
            live() - before - static_cast<int64_t>(y.nbytes()) + static_cast<int64_t>(x.nbytes());
        EXPECT_EQ(kept, description.blocks[m].activation_bytes_per_sample * B)
            << description.blocks[m].name;
        total += kept;
        x = y;
      }
      EXPECT_EQ(total, description.activation_bytes_per_sample * B);
      model_total.push_back(total);
    }
    // fp32 against bf16 (fp16 keeps the same as bf16): about half of each block in 16-bit.
    EXPECT_LT(model_total[1], model_total[0] * 3 / 4);
    EXPECT_EQ(model_total[1], model_total[2]);
    std::printf("GPT activations kept (dropout %.1f): fp32 %lld bytes, bf16 %lld, fp16 %lld\n",
                dropout, static_cast<long long>(model_total[0]),
                static_cast<long long>(model_total[1]), static_cast<long long>(model_total[2]));
  }
}

// The MLP kinds likewise, as a whole: what a forward leaves allocated (the output dropped) equals
// the description's bytes x batch, less the input in fp32 (the first Linear keeps the caller's
// tensor itself; under autocast it keeps a new 16-bit copy).
TEST(MixedPrecision, TheMlpKindsKeepWhatTheirDescriptionsSayInEachPrecision) {
  CachingAllocator& host = allocatorFor(Device::cpu());
  for (const char* kind : {"mlp", "residual_mlp"}) {
    ModelSpec spec;
    spec.kind = kind;
    spec.layers = {32, 64, 64, 64, 8};
    spec.activation = ActivationKind::kGelu;
    spec.dropout = spec.kind == "mlp" ? 0.25 : 0;  // residual_mlp has none
    spec.layer_norm = true;
    spec.seed = 1;
    const int64_t batch = 128;  // every tensor a multiple of 512 bytes
    const Tensor x = randomTensor({batch, 32}, 3);
    std::vector<int64_t> kept_by_precision;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(fmt::format("{} {}", kind, dtypeName(dtype)));
      std::unique_ptr<Sequential> model = buildModel(spec);
      setAutocast(*model, dtype);
      const auto before = static_cast<int64_t>(host.stats().allocated_bytes);
      model->forward(x);
      const int64_t kept = static_cast<int64_t>(host.stats().allocated_bytes) - before;
      const int64_t input_reused = dtype == DType::kF32 ? static_cast<int64_t>(x.nbytes()) : 0;
      EXPECT_EQ(kept,
                describeModel(spec, dtype).activation_bytes_per_sample * batch - input_reused);
      kept_by_precision.push_back(kept);
    }
    EXPECT_LT(kept_by_precision[1], kept_by_precision[0]);
  }
}

// Activation checkpointing under autocast: the recomputed blocks run the same casts and roundings
// on the same inputs and draw the same dropout masks, so the gradients equal those without it, bit
// for bit, in bf16 and fp16 as in fp32.
TEST(MixedPrecision, CheckpointedBlocksGiveTheSameGradientsUnderAutocast) {
  const GptConfig config{.vocab_size = 32,
                         .context = 8,
                         .layers = 2,
                         .heads = 2,
                         .dim = 16,
                         .dropout = 0.1f,
                         .seed = 6};
  std::vector<int32_t> ids(3 * 8), targets(3 * 8);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((i * 5) % 32);
    targets[i] = static_cast<int32_t>((i * 5 + 1) % 32);
  }
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(dtypeName(dtype));
    std::vector<std::vector<float>> grads[2];
    double losses[2] = {0, 0};
    for (int checkpointing = 0; checkpointing < 2; ++checkpointing) {
      std::unique_ptr<Sequential> model = buildGpt(config);
      setAutocast(*model, dtype);
      model->setActivationCheckpointing(checkpointing == 1);
      SoftmaxCrossEntropy loss_fn;
      losses[checkpointing] = loss_fn.forward(model->forward(Tensor::fromInts(ids, {3, 8})),
                                              Tensor::fromInts(targets, {3, 8}));
      model->backward(loss_fn.backward());
      for (const NamedParameter& p : model->namedParameters())
        grads[checkpointing].push_back(p.parameter->grad.toFloatVector());
    }
    EXPECT_EQ(losses[1], losses[0]);
    ASSERT_EQ(grads[1].size(), grads[0].size());
    for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_EQ(grads[1][i], grads[0][i]) << i;
  }
}

// ---------------------------------------------------------------------------------------------
// A short loss curve: a small GPT learns a token stream with structure (each token follows from
// the previous by a fixed map, with an occasional random step), fp32 and bf16 from the same
// weights on the same batches.

struct CurveOptions {
  int steps = 30;
  GptConfig config{.vocab_size = 32, .context = 16, .layers = 2, .heads = 2, .dim = 32, .seed = 9};
  int64_t batch = 8;
};

std::vector<double> lossCurve(const CurveOptions& o, DType precision) {
  const GptConfig& c = o.config;
  std::vector<int32_t> stream(static_cast<size_t>(o.steps * o.batch * c.context + 1));
  Rng rng(4);
  stream[0] = 1;
  for (size_t i = 1; i < stream.size(); ++i) {
    const int64_t next = (5 * stream[i - 1] + 3) % c.vocab_size;
    stream[i] = static_cast<int32_t>(rng.below(8) == 0 ? rng.below(c.vocab_size) : next);
  }
  std::unique_ptr<Sequential> model = buildGpt(c);
  setAutocast(*model, precision);
  Adam optimizer(model->namedParameters(), AdamOptions{.lr = 3e-3f,
                                                       .beta1 = 0.9f,
                                                       .beta2 = 0.95f,
                                                       .eps = 1e-8f,
                                                       .weight_decay = 0.1f,
                                                       .decoupled_weight_decay = true});
  SoftmaxCrossEntropy loss_fn;
  std::vector<double> losses;
  for (int step = 0; step < o.steps; ++step) {
    std::vector<int32_t> x, y;
    for (int64_t b = 0; b < o.batch; ++b) {
      const size_t at = static_cast<size_t>((step * o.batch + b) * c.context);
      x.insert(x.end(), stream.begin() + at, stream.begin() + at + c.context);
      y.insert(y.end(), stream.begin() + at + 1, stream.begin() + at + c.context + 1);
    }
    optimizer.zeroGrad();
    const Tensor logits = model->forward(Tensor::fromInts(x, {o.batch, c.context}));
    losses.push_back(loss_fn.forward(logits, Tensor::fromInts(y, {o.batch, c.context})));
    model->backward(loss_fn.backward());
    optimizer.step();
  }
  return losses;
}

// bf16 follows fp32: both start from the same weights, so the first loss differs only by the
// logits' rounding (bf16 holds 8 significant bits: a logit of magnitude ~1 moves by <= 2^-9, the
// loss by about that much); the trajectories then drift apart slowly as the rounded gradients
// steer AdamW's updates slightly differently. Measured over these 30 steps (printed): fp32 3.4700
// -> 1.8461, bf16 3.4699 -> 1.8451, at most 0.0010 apart. Bound: 0.02 (20x that, an 80th of the
// fall), and both curves must fall by a third.
TEST(MixedPrecision, ABf16LossCurveFollowsFp32sAndFalls) {
  const CurveOptions options;
  const std::vector<double> fp32 = lossCurve(options, DType::kF32);
  const std::vector<double> bf16 = lossCurve(options, DType::kBF16);
  double worst = 0;
  for (size_t i = 0; i < fp32.size(); ++i) worst = std::max(worst, std::abs(bf16[i] - fp32[i]));
  std::printf("loss fp32 %.4f -> %.4f, bf16 %.4f -> %.4f; max |bf16 - fp32| %.4f, final %.4f\n",
              fp32.front(), fp32.back(), bf16.front(), bf16.back(), worst,
              std::abs(bf16.back() - fp32.back()));
  EXPECT_LE(std::abs(bf16.front() - fp32.front()), 0.01);
  EXPECT_LE(worst, 0.02);
  EXPECT_LT(bf16.back(), bf16.front() * 2 / 3);
  EXPECT_LT(fp32.back(), fp32.front() * 2 / 3);
}

}  // namespace
}  // namespace ringmaster
