// The GPT against PyTorch: a small GPT (vocab 64, context 16, 2 layers, 2 heads, dim 32) writes
// its weights and a batch to safetensors; gpt_reference.py (Debian's python3-torch) builds the same
// model from them and returns logits, loss, every gradient and one AdamW step, which must agree
// within 1e-5 relative to each tensor's largest magnitude (fp32 on both sides; the sums run in
// different orders, so bit equality is not expected: the measured worst is printed). The script
// also writes a Hugging Face GPT-2 state dict ("transformer." names, Conv1D layout, mask buffers,
// tied lm_head.weight) with random weights, which must load through loadModelWeights (the
// model.init_checkpoint path) and give PyTorch's logits. Needs python3 with torch: without it the
// test fails saying so.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "checkpoint/safetensors.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "core/random.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "optim/optimizer.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

const char* const kPython = RINGMASTER_PYTHON_TORCH;
const char* const kScript = RINGMASTER_SOURCE_DIR "/tests/engine/nn/gpt_reference.py";

// The largest |a - b| over the largest |b|: relative to the tensor's scale, so that elements near
// zero (gradients of rarely used embedding rows) do not dominate.
double relativeError(const Tensor& actual, const Tensor& expected) {
  const std::vector<float> a = actual.toFloatVector(), b = expected.toFloatVector();
  EXPECT_EQ(a.size(), b.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return scale > 0 ? worst / scale : worst;
}

class GptReference : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_gpt_reference_{}", getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
};

TEST_F(GptReference, LogitsLossGradientsAndAdamWMatchPyTorch) {
  const std::string probe = fmt::format("{} -c 'import torch' 2>/dev/null", kPython);
  ASSERT_EQ(std::system(probe.c_str()), 0)
      << kPython << " cannot import torch: install python3-torch (scripts/install-deps.sh)";

  const GptConfig config{
      .vocab_size = 64, .context = 16, .layers = 2, .heads = 2, .dim = 32, .seed = 7};
  std::unique_ptr<Sequential> model = buildGpt(config);
  // Biases and LayerNorm parameters away from 0 and 1, so that their gradients are general.
  for (NamedParameter& p : model->namedParameters()) {
    if (p.name.find("bias") == std::string::npos && p.name.find("ln_") == std::string::npos)
      continue;
    std::vector<float> v = p.parameter->value.toFloatVector();
    Rng rng(std::hash<std::string>{}(p.name));
    for (float& x : v) x += static_cast<float>(0.1 * rng.normal());
    p.parameter->value.copyFrom(Tensor::fromVector(v, p.parameter->value.shape()));
  }
  const int64_t B = 3, T = 16;
  std::vector<int32_t> ids(B * T), targets(B * T);
  Rng rng(11);
  for (int64_t i = 0; i < B * T; ++i) {
    ids[i] = static_cast<int32_t>(rng.below(64));
    targets[i] = static_cast<int32_t>(rng.below(64));
  }
  const AdamOptions adam{.lr = 1e-2f,
                         .beta1 = 0.9f,
                         .beta2 = 0.95f,
                         .eps = 1e-8f,
                         .weight_decay = 0.1f,
                         .decoupled_weight_decay = true};
  std::vector<std::pair<std::string, Tensor>> inputs;
  for (const NamedParameter& p : model->namedParameters())
    inputs.emplace_back(p.name, p.parameter->value.clone());
  inputs.emplace_back("ids", Tensor::fromInts(ids, {B, T}));
  inputs.emplace_back("targets", Tensor::fromInts(targets, {B, T}));
  const std::string in = (dir_ / "in.safetensors").string();
  const std::string out = (dir_ / "out.safetensors").string();
  const std::string hf = (dir_ / "hf.safetensors").string();
  saveSafetensors(in, inputs,
                  {{"vocab_size", "64"},
                   {"context", "16"},
                   {"layers", "2"},
                   {"heads", "2"},
                   {"dim", "32"},
                   {"lr", fmt::format("{}", adam.lr)},
                   {"beta1", fmt::format("{}", adam.beta1)},
                   {"beta2", fmt::format("{}", adam.beta2)},
                   {"eps", fmt::format("{}", adam.eps)},
                   {"weight_decay", fmt::format("{}", adam.weight_decay)}});
  const std::string command = fmt::format("{} {} {} {} {}", kPython, kScript, in, out, hf);
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const SafetensorsFile reference = loadSafetensors(out);

  // Forward, loss and backward as the trainer runs them.
  model->zeroGrad();
  const Tensor logits = model->forward(Tensor::fromInts(ids, {B, T}));
  SoftmaxCrossEntropy loss_fn;
  const double loss = loss_fn.forward(logits, Tensor::fromInts(targets, {B, T}));
  model->backward(loss_fn.backward());

  constexpr double kTolerance = 1e-5;
  double worst = relativeError(logits, reference.tensors.at("logits"));
  EXPECT_LE(worst, kTolerance) << "logits";
  const double reference_loss = reference.tensors.at("loss").toFloatVector()[0];
  EXPECT_NEAR(loss, reference_loss, kTolerance * std::abs(reference_loss));
  double worst_grad = 0;
  for (const NamedParameter& p : model->namedParameters()) {
    const double e = relativeError(p.parameter->grad, reference.tensors.at("grad." + p.name));
    EXPECT_LE(e, kTolerance) << "grad of " << p.name;
    worst_grad = std::max(worst_grad, e);
  }
  Adam optimizer(model->namedParameters(), adam);
  optimizer.step();
  // Adam's first step moves each element by about lr * g / (|g| + eps): for a gradient element
  // near zero, within the gradients' rounding difference (~1e-6 of the tensor's largest), the
  // step's size is ill-conditioned (PyTorch and we may round it to a different side), so the
  // step is compared where |g| >= 1e-3 of the tensor's largest gradient; there it is
  // well-conditioned and both sides agree to 1e-5 of the parameter's scale.
  double worst_step = 0;
  int64_t compared = 0;
  for (const NamedParameter& p : model->namedParameters()) {
    const std::vector<float> g = reference.tensors.at("grad." + p.name).toFloatVector();
    const std::vector<float> ours = p.parameter->value.toFloatVector();
    const std::vector<float> theirs = reference.tensors.at("step." + p.name).toFloatVector();
    double g_max = 0, scale = 0, error = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      g_max = std::max(g_max, std::abs(double(g[i])));
      scale = std::max(scale, std::abs(double(theirs[i])));
    }
    for (size_t i = 0; i < g.size(); ++i) {
      if (std::abs(g[i]) < 1e-3 * g_max) continue;
      error = std::max(error, std::abs(double(ours[i]) - theirs[i]));
      ++compared;
    }
    EXPECT_LE(error / scale, kTolerance) << "AdamW step of " << p.name;
    worst_step = std::max(worst_step, error / scale);
  }
  EXPECT_GT(compared, 10000);  // of 27k elements: most gradients are well away from zero
  std::cout << "relative error vs PyTorch: logits " << worst << ", loss "
            << std::abs(loss - reference_loss) / std::abs(reference_loss) << ", gradients "
            << worst_grad << ", AdamW step " << worst_step << "\n";

  // The Hugging Face layout loads through init_checkpoint's path and gives PyTorch's logits.
  std::unique_ptr<Sequential> loaded = buildGpt(config);
  loadModelWeights(hf, loaded->namedParameters());
  const double hf_error = relativeError(loaded->forward(Tensor::fromInts(ids, {B, T})),
                                        reference.tensors.at("hf_logits"));
  EXPECT_LE(hf_error, kTolerance);
  std::cout << "relative error of the Hugging Face state dict's logits: " << hf_error << "\n";

  // A checkpoint we write loads back; a shape mismatch names the tensor.
  std::vector<std::pair<std::string, Tensor>> weights;
  for (const NamedParameter& p : loaded->namedParameters())
    weights.emplace_back(p.name, p.parameter->value);
  const std::string ours = (dir_ / "ours.safetensors").string();
  saveSafetensors(ours, weights);
  std::unique_ptr<Sequential> again = buildGpt(config);
  loadModelWeights(ours, again->namedParameters());
  EXPECT_EQ(again->namedParameters()[5].parameter->value.toFloatVector(),
            loaded->namedParameters()[5].parameter->value.toFloatVector());
  weights[4].second = Tensor::zeros({3, 3});
  saveSafetensors(ours, weights);
  try {
    loadModelWeights(ours, again->namedParameters());
    ADD_FAILURE() << "a wrong shape loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'" + weights[4].first + "'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ringmaster
