// Optimizer updates against PyTorch. The expected values were produced by Debian's python3-torch
// 1.13 (torch.optim.SGD / Adam / AdamW and clip_grad_norm_ in float64) for the parameter
// [1, -2, 0.5] and the gradient sequence below; float32 arithmetic here agrees to ~1e-6.
#include <gtest/gtest.h>

#include "core/error.h"
#include "optim/optimizer.h"
#include "tensor/ops.h"

namespace ringmaster {
namespace {

const std::vector<std::vector<float>> kGradients = {
    {0.5f, -1.0f, 2.0f}, {0.1f, 0.3f, -0.7f}, {-0.4f, 0.2f, 0.05f}};

// Runs three steps of `optimizer` over a parameter starting at [1, -2, 0.5].
template <typename MakeOptimizer>
std::vector<float> runSteps(MakeOptimizer make) {
  Parameter p = makeParameter(Tensor::fromVector({1.0f, -2.0f, 0.5f}, {3}));
  std::vector<NamedParameter> params{{"w", &p}};
  auto optimizer = make(params);
  for (const auto& g : kGradients) {
    p.grad.copyFrom(Tensor::fromVector(g, {3}));
    optimizer.step();
  }
  return p.value.toFloatVector();
}

void expectNear(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6) << "element " << i;
}

TEST(Sgd, PlainMatchesPyTorch) {
  expectNear(runSteps([](auto& ps) { return Sgd(ps, {.lr = 0.1f}); }), {0.98, -1.95, 0.365});
}

TEST(Sgd, MomentumAndWeightDecayMatchPyTorch) {
  expectNear(runSteps([](auto& ps) {
               return Sgd(ps, {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.1f});
             }),
             {0.831874, -1.698248, 0.0650695});
}

TEST(Sgd, DampeningMatchesPyTorch) {
  expectNear(runSteps([](auto& ps) {
               return Sgd(ps, {.lr = 0.05f, .momentum = 0.8f, .dampening = 0.3f});
             }),
             {0.9467, -1.9039, 0.29835});
}

TEST(Sgd, NesterovMatchesPyTorch) {
  expectNear(runSteps([](auto& ps) {
               return Sgd(ps, {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f,
                               .nesterov = true});
             }),
             {0.869465558191, -1.760250616382, -0.00981202123});
}

TEST(Sgd, NesterovWithoutMomentumIsRejected) {
  Parameter p = makeParameter(Tensor::zeros({1}));
  std::vector<NamedParameter> params{{"w", &p}};
  EXPECT_THROW(Sgd(params, {.lr = 0.1f, .nesterov = true}), Error);
}

TEST(Adam, L2WeightDecayMatchesPyTorch) {
  expectNear(runSteps([](auto& ps) {
               return Adam(ps, {.lr = 0.01f, .beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-6f,
                                .weight_decay = 0.1f});
             }),
             {0.978992433486, -1.980175917659, 0.483345342278});
}

TEST(AdamW, DecoupledWeightDecayMatchesPyTorch) {
  expectNear(runSteps([](auto& ps) {
               return Adam(ps, {.lr = 0.01f, .beta1 = 0.8f, .beta2 = 0.95f, .eps = 1e-6f,
                                .weight_decay = 0.1f, .decoupled_weight_decay = true});
             }),
             {0.979233833759, -1.978860791093, 0.482514562409});
}

TEST(Adam, StateRoundTripsAndResumesIdentically) {
  AdamOptions options{.lr = 0.01f, .weight_decay = 0.1f, .decoupled_weight_decay = true};
  Parameter a = makeParameter(Tensor::fromVector({1.0f, -2.0f, 0.5f}, {3}));
  std::vector<NamedParameter> pa{{"w", &a}};
  Adam first(pa, options);
  a.grad.copyFrom(Tensor::fromVector(kGradients[0], {3}));
  first.step();

  Parameter b = makeParameter(a.value.clone());
  std::vector<NamedParameter> pb{{"w", &b}};
  Adam resumed(pb, options);
  std::map<std::string, Tensor> state;
  for (auto& [name, t] : first.stateTensors()) state[name] = t.clone();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_TRUE(state.count("w.exp_avg") && state.count("w.exp_avg_sq"));
  resumed.loadState(state, first.stepCount());

  for (auto* p : {&a, &b}) p->grad.copyFrom(Tensor::fromVector(kGradients[1], {3}));
  first.step();
  resumed.step();
  EXPECT_EQ(a.value.toFloatVector(), b.value.toFloatVector());
}

TEST(Optimizer, LoadStateNamesTheMissingEntry) {
  Parameter p = makeParameter(Tensor::zeros({3}));
  std::vector<NamedParameter> params{{"0.weight", &p}};
  Sgd sgd(params, {.lr = 0.1f, .momentum = 0.9f});
  try {
    sgd.loadState({}, 5);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(e.message().find("0.weight.momentum_buffer"), std::string::npos) << e.message();
  }
}

TEST(ClipGradNorm, MatchesPyTorch) {
  Parameter a = makeParameter(Tensor::zeros({2}));
  Parameter b = makeParameter(Tensor::zeros({1}));
  a.grad.copyFrom(Tensor::fromVector({3.0f, 4.0f}, {2}));
  b.grad.copyFrom(Tensor::fromVector({12.0f}, {1}));
  std::vector<NamedParameter> params{{"a", &a}, {"b", &b}};
  EXPECT_NEAR(clipGradNorm(params, 5.0), 13.0, 1e-9);
  expectNear(a.grad.toFloatVector(), {1.1538460650887643, 1.5384614201183524});
  expectNear(b.grad.toFloatVector(), {4.615384260355057});
}

TEST(ClipGradNorm, LeavesSmallGradientsAlone) {
  Parameter a = makeParameter(Tensor::zeros({2}));
  a.grad.copyFrom(Tensor::fromVector({0.3f, 0.4f}, {2}));
  std::vector<NamedParameter> params{{"a", &a}};
  EXPECT_NEAR(clipGradNorm(params, 1.0), 0.5, 1e-7);
  EXPECT_EQ(a.grad.toFloatVector(), (std::vector<float>{0.3f, 0.4f}));
}

}  // namespace
}  // namespace ringmaster
