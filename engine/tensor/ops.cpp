// Shape and device checks for ops.h, and the dispatch to ringmaster::cpu or ringmaster::cuda.
#include "tensor/ops.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tensor/kernels.h"

namespace ringmaster::ops {

namespace {

void checkSameDevice(std::initializer_list<const Tensor*> tensors) {
  const Device device = (*tensors.begin())->device();
  for (const Tensor* t : tensors) {
    RM_CHECK_ARG(t->defined(), "undefined tensor passed to an op");
    RM_CHECK_ARG(t->device() == device, fmt::format("tensors on {} and {} mixed in one op",
                                                    device.str(), t->device().str()));
  }
}

void checkSameNumel(const Tensor& a, const Tensor& b) {
  RM_CHECK_ARG(a.numel() == b.numel(), fmt::format("shapes {} and {} differ in size",
                                                   shapeStr(a.shape()), shapeStr(b.shape())));
}

// A tensor as a matrix: the first axis is the rows, the product of the others the columns.
int64_t rowsOf(const Tensor& t) { return t.rank() == 0 ? 1 : t.dim(0); }
int64_t colsOf(const Tensor& t) {
  int64_t cols = 1;
  for (int64_t axis = 1; axis < t.rank(); ++axis) cols *= t.dim(static_cast<int>(axis));
  return cols;
}

}  // namespace

// Calls the kernel `name` of the tensors' device with the given arguments.
#if RINGMASTER_HAVE_CUDA
#define RM_DISPATCH(device, name, ...) \
  ((device).isCuda() ? ::ringmaster::cuda::name(__VA_ARGS__) : ::ringmaster::cpu::name(__VA_ARGS__))
#else
#define RM_DISPATCH(device, name, ...) ::ringmaster::cpu::name(__VA_ARGS__)
#endif

void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
            float beta) {
  checkSameDevice({&a, &b, &c});
  RM_CHECK_ARG(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, "matmul takes 2-D tensors");
  const int64_t m = trans_a ? a.dim(1) : a.dim(0);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const int64_t kb = trans_b ? b.dim(1) : b.dim(0);
  const int64_t n = trans_b ? b.dim(0) : b.dim(1);
  RM_CHECK_ARG(k == kb && c.dim(0) == m && c.dim(1) == n,
               fmt::format("matmul shapes {}{} x {}{} -> {} do not agree", shapeStr(a.shape()),
                           trans_a ? "^T" : "", shapeStr(b.shape()), trans_b ? "^T" : "",
                           shapeStr(c.shape())));
  RM_DISPATCH(c.device(), gemm, trans_a, trans_b, m, n, k, alpha, a.data<float>(),
              b.data<float>(), beta, c.data<float>());
}

void fill(Tensor& y, float value) { RM_DISPATCH(y.device(), fill, y.data<float>(), y.numel(), value); }

void addBiasRows(Tensor& y, const Tensor& bias) {
  checkSameDevice({&y, &bias});
  RM_CHECK_ARG(colsOf(y) == bias.numel(), fmt::format("bias {} for rows of {}",
                                                      shapeStr(bias.shape()), shapeStr(y.shape())));
  RM_DISPATCH(y.device(), addBiasRows, y.data<float>(), bias.data<float>(), rowsOf(y), colsOf(y));
}

void sumRows(const Tensor& x, Tensor& out, float beta) {
  checkSameDevice({&x, &out});
  RM_CHECK_ARG(colsOf(x) == out.numel(), fmt::format("row sum of {} into {}", shapeStr(x.shape()),
                                                     shapeStr(out.shape())));
  RM_DISPATCH(x.device(), sumRows, x.data<float>(), out.data<float>(), rowsOf(x), colsOf(x), beta);
}

void axpy(float alpha, const Tensor& x, Tensor& y) {
  checkSameDevice({&x, &y});
  checkSameNumel(x, y);
  RM_DISPATCH(y.device(), axpy, alpha, x.data<float>(), y.data<float>(), y.numel());
}

void scale(Tensor& y, float alpha) {
  RM_DISPATCH(y.device(), scale, y.data<float>(), alpha, y.numel());
}

void mul(const Tensor& a, const Tensor& b, Tensor& out) {
  checkSameDevice({&a, &b, &out});
  checkSameNumel(a, b);
  checkSameNumel(a, out);
  RM_DISPATCH(out.device(), mul, a.data<float>(), b.data<float>(), out.data<float>(), out.numel());
}

double sumSquares(const Tensor& x) {
  return RM_DISPATCH(x.device(), sumSquares, x.data<float>(), x.numel());
}

void relu(const Tensor& x, Tensor& y) {
  checkSameDevice({&x, &y});
  checkSameNumel(x, y);
  RM_DISPATCH(y.device(), relu, x.data<float>(), y.data<float>(), y.numel());
}

void reluBackward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  checkSameDevice({&x, &dy, &dx});
  checkSameNumel(x, dy);
  checkSameNumel(x, dx);
  RM_DISPATCH(dx.device(), reluBackward, x.data<float>(), dy.data<float>(), dx.data<float>(),
              dx.numel());
}

void gelu(const Tensor& x, Tensor& y) {
  checkSameDevice({&x, &y});
  checkSameNumel(x, y);
  RM_DISPATCH(y.device(), gelu, x.data<float>(), y.data<float>(), y.numel());
}

void geluBackward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  checkSameDevice({&x, &dy, &dx});
  checkSameNumel(x, dy);
  checkSameNumel(x, dx);
  RM_DISPATCH(dx.device(), geluBackward, x.data<float>(), dy.data<float>(), dx.data<float>(),
              dx.numel());
}

void dropout(const Tensor& x, Tensor& y, Tensor& mask, float p, uint64_t seed, uint64_t offset) {
  checkSameDevice({&x, &y, &mask});
  checkSameNumel(x, y);
  checkSameNumel(x, mask);
  RM_CHECK_ARG(p >= 0.0f && p < 1.0f, fmt::format("dropout probability {} outside [0, 1)", p));
  RM_DISPATCH(y.device(), dropout, x.data<float>(), y.data<float>(), mask.data<float>(), y.numel(),
              p, seed, offset);
}

void layerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                      Tensor& mean, Tensor& rstd, float eps) {
  checkSameDevice({&x, &gamma, &beta, &y, &mean, &rstd});
  const int64_t rows = rowsOf(x), cols = colsOf(x);
  RM_CHECK_ARG(gamma.numel() == cols && beta.numel() == cols && y.numel() == x.numel() &&
                   mean.numel() == rows && rstd.numel() == rows,
               fmt::format("layer norm of {} with weight {}", shapeStr(x.shape()),
                           shapeStr(gamma.shape())));
  RM_DISPATCH(x.device(), layerNormForward, x.data<float>(), gamma.data<float>(),
              beta.data<float>(), y.data<float>(), mean.data<float>(), rstd.data<float>(), rows,
              cols, eps);
}

void layerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                       const Tensor& rstd, const Tensor& dy, Tensor& dx, Tensor& dgamma,
                       Tensor& dbeta) {
  checkSameDevice({&x, &gamma, &mean, &rstd, &dy, &dx, &dgamma, &dbeta});
  checkSameNumel(x, dy);
  checkSameNumel(x, dx);
  RM_DISPATCH(x.device(), layerNormBackward, x.data<float>(), gamma.data<float>(),
              mean.data<float>(), rstd.data<float>(), dy.data<float>(), dx.data<float>(),
              dgamma.data<float>(), dbeta.data<float>(), rowsOf(x), colsOf(x));
}

double softmaxCrossEntropyForward(const Tensor& logits, const Tensor& labels, Tensor& probs) {
  checkSameDevice({&logits, &labels, &probs});
  checkSameNumel(logits, probs);
  RM_CHECK_ARG(labels.numel() == rowsOf(logits),
               fmt::format("{} labels for logits {}", labels.numel(), shapeStr(logits.shape())));
  return RM_DISPATCH(logits.device(), softmaxCrossEntropyForward, logits.data<float>(),
                     labels.data<int32_t>(), probs.data<float>(), rowsOf(logits), colsOf(logits));
}

void softmaxCrossEntropyBackward(const Tensor& probs, const Tensor& labels, Tensor& dlogits,
                                 float scale) {
  checkSameDevice({&probs, &labels, &dlogits});
  checkSameNumel(probs, dlogits);
  RM_CHECK_ARG(labels.numel() == rowsOf(probs), "label count differs from the rows of probs");
  RM_DISPATCH(probs.device(), softmaxCrossEntropyBackward, probs.data<float>(),
              labels.data<int32_t>(), dlogits.data<float>(), rowsOf(probs), colsOf(probs), scale);
}

int64_t countCorrect(const Tensor& logits, const Tensor& labels) {
  checkSameDevice({&logits, &labels});
  RM_CHECK_ARG(labels.numel() == rowsOf(logits), "label count differs from the rows of logits");
  return RM_DISPATCH(logits.device(), countCorrect, logits.data<float>(), labels.data<int32_t>(),
                     rowsOf(logits), colsOf(logits));
}

void sgdStep(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, float lr, float momentum,
             float dampening, float weight_decay, bool nesterov, bool first_step) {
  checkSameDevice({&param, &grad});
  checkSameNumel(param, grad);
  float* buffer = nullptr;
  if (momentum != 0.0f) {
    checkSameDevice({&param, &momentum_buffer});
    checkSameNumel(param, momentum_buffer);
    buffer = momentum_buffer.data<float>();
  }
  RM_DISPATCH(param.device(), sgdStep, param.data<float>(), grad.data<float>(), buffer,
              param.numel(), lr, momentum, dampening, weight_decay, nesterov, first_step);
}

void adamStep(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, float lr,
              float beta1, float beta2, float eps, float weight_decay, int64_t step,
              bool decoupled) {
  checkSameDevice({&param, &grad, &exp_avg, &exp_avg_sq});
  checkSameNumel(param, grad);
  checkSameNumel(param, exp_avg);
  checkSameNumel(param, exp_avg_sq);
  RM_CHECK_ARG(step >= 1, "adam steps count from 1");
  RM_DISPATCH(param.device(), adamStep, param.data<float>(), grad.data<float>(),
              exp_avg.data<float>(), exp_avg_sq.data<float>(), param.numel(), lr, beta1, beta2,
              eps, weight_decay, step, decoupled);
}

}  // namespace ringmaster::ops
