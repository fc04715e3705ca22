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
int64_t rowsOf(const Tensor& t) {
  return t.rank() == 0 ? 1 : t.dim(0);
}
int64_t colsOf(const Tensor& t) {
  int64_t cols = 1;
  for (int64_t axis = 1; axis < t.rank(); ++axis) cols *= t.dim(static_cast<int>(axis));
  return cols;
}

void checkDType(const Tensor& t, DType dtype, const char* what) {
  RM_CHECK_ARG(t.dtype() == dtype, fmt::format("{} must be {}, got {} {}", what, dtypeName(dtype),
                                               dtypeName(t.dtype()), shapeStr(t.shape())));
}

void checkShape(const Tensor& t, const Shape& expected, const char* what) {
  RM_CHECK_ARG(t.shape() == expected, fmt::format("{} has shape {}, expected {}", what,
                                                  shapeStr(t.shape()), shapeStr(expected)));
}

// The product of the axes before the last two (the batch of matmulBatched).
int64_t leadingNumel(const Tensor& t) {
  int64_t n = 1;
  for (int64_t axis = 0; axis + 2 < t.rank(); ++axis) n *= t.dim(static_cast<int>(axis));
  return n;
}

bool isLowPrecision(DType dtype) {
  return dtype == DType::kBF16 || dtype == DType::kF16;
}

// matmul's dtypes: a and b both F32, both BF16 or both F16; c F32.
void checkMatmulDTypes(const Tensor& a, const Tensor& b, const Tensor& c, const char* op) {
  RM_CHECK_ARG(a.dtype() == b.dtype() && (a.dtype() == DType::kF32 || isLowPrecision(a.dtype())),
               fmt::format("{} takes a and b both F32, both BF16 or both F16, got {} {} and {} {}",
                           op, dtypeName(a.dtype()), shapeStr(a.shape()), dtypeName(b.dtype()),
                           shapeStr(b.shape())));
  RM_CHECK_ARG(c.dtype() == DType::kF32,
               fmt::format("{}'s output c must be F32 (products accumulate in fp32), got {} {}", op,
                           dtypeName(c.dtype()), shapeStr(c.shape())));
}

// The elements of a BF16 or F16 tensor as the kernels take them.
const uint16_t* bits16(const Tensor& t) {
  return static_cast<const uint16_t*>(t.raw());
}
uint16_t* bits16(Tensor& t) {
  return static_cast<uint16_t*>(t.raw());
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
  checkMatmulDTypes(a, b, c, "matmul");
  if (a.dtype() == DType::kF32) {
    RM_DISPATCH(c.device(), gemm, trans_a, trans_b, m, n, k, alpha, a.data<float>(),
                b.data<float>(), beta, c.data<float>());
  } else {
    RM_DISPATCH(c.device(), gemmLowPrecision, a.dtype(), trans_a, trans_b, m, n, k, alpha,
                bits16(a), bits16(b), beta, c.data<float>());
  }
}

void fill(Tensor& y, float value) {
  RM_DISPATCH(y.device(), fill, y.data<float>(), y.numel(), value);
}

void addBiasRows(Tensor& y, const Tensor& bias) {
  checkSameDevice({&y, &bias});
  RM_CHECK_ARG(colsOf(y) == bias.numel(),
               fmt::format("bias {} for rows of {}", shapeStr(bias.shape()), shapeStr(y.shape())));
  RM_DISPATCH(y.device(), addBiasRows, y.data<float>(), bias.data<float>(), rowsOf(y), colsOf(y));
}

void sumRows(const Tensor& x, Tensor& out, float beta) {
  checkSameDevice({&x, &out});
  RM_CHECK_ARG(colsOf(x) == out.numel(),
               fmt::format("row sum of {} into {}", shapeStr(x.shape()), shapeStr(out.shape())));
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
  RM_CHECK_ARG(
      gamma.numel() == cols && beta.numel() == cols && y.numel() == x.numel() &&
          mean.numel() == rows && rstd.numel() == rows,
      fmt::format("layer norm of {} with weight {}", shapeStr(x.shape()), shapeStr(gamma.shape())));
  RM_DISPATCH(x.device(), layerNormForward, x.data<float>(), gamma.data<float>(),
              beta.data<float>(), y.data<float>(), mean.data<float>(), rstd.data<float>(), rows,
              cols, eps);
}

void layerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
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
              exp_avg.data<float>(), exp_avg_sq.data<float>(), param.numel(), lr, beta1, beta2, eps,
              weight_decay, step, decoupled);
}

#if RINGMASTER_HAVE_CUDA
namespace {

// Whether the multi-tensor steps take the CUDA path: every tensor on one CUDA device.
bool allOnOneCudaDevice(const std::vector<const Tensor*>& tensors) {
  if (tensors.empty() || !tensors.front()->device().isCuda()) return false;
  for (const Tensor* t : tensors) {
    RM_CHECK_ARG(t->device() == tensors.front()->device(),
                 fmt::format("a multi-tensor optimizer step spans {} and {}",
                             tensors.front()->device().str(), t->device().str()));
  }
  return true;
}

}  // namespace
#endif

void adamStepMulti(const std::vector<AdamTensors>& tensors, float lr, float beta1, float beta2,
                   float eps, float weight_decay, int64_t step, bool decoupled) {
#if RINGMASTER_HAVE_CUDA
  std::vector<const Tensor*> params;
  for (const AdamTensors& t : tensors) params.push_back(t.param);
  if (allOnOneCudaDevice(params)) {
    RM_CHECK_ARG(step >= 1, "adam steps count from 1");
    std::vector<float*> param_ptrs, exp_avg_ptrs, exp_avg_sq_ptrs;
    std::vector<const float*> grad_ptrs;
    std::vector<int64_t> sizes;
    for (const AdamTensors& t : tensors) {
      checkSameDevice({t.param, t.grad, t.exp_avg, t.exp_avg_sq});
      checkSameNumel(*t.param, *t.grad);
      checkSameNumel(*t.param, *t.exp_avg);
      checkSameNumel(*t.param, *t.exp_avg_sq);
      param_ptrs.push_back(t.param->data<float>());
      grad_ptrs.push_back(t.grad->data<float>());
      exp_avg_ptrs.push_back(t.exp_avg->data<float>());
      exp_avg_sq_ptrs.push_back(t.exp_avg_sq->data<float>());
      sizes.push_back(t.param->numel());
    }
    cuda::adamStepMulti(param_ptrs.data(), grad_ptrs.data(), exp_avg_ptrs.data(),
                        exp_avg_sq_ptrs.data(), sizes.data(), static_cast<int64_t>(sizes.size()),
                        lr, beta1, beta2, eps, weight_decay, step, decoupled);
    return;
  }
#endif
  for (const AdamTensors& t : tensors)
    adamStep(*t.param, *t.grad, *t.exp_avg, *t.exp_avg_sq, lr, beta1, beta2, eps, weight_decay,
             step, decoupled);
}

void sgdStepMulti(const std::vector<SgdTensors>& tensors, float lr, float momentum, float dampening,
                  float weight_decay, bool nesterov, bool first_step) {
#if RINGMASTER_HAVE_CUDA
  std::vector<const Tensor*> params;
  for (const SgdTensors& t : tensors) params.push_back(t.param);
  if (allOnOneCudaDevice(params)) {
    std::vector<float*> param_ptrs, buffer_ptrs;
    std::vector<const float*> grad_ptrs;
    std::vector<int64_t> sizes;
    for (const SgdTensors& t : tensors) {
      checkSameDevice({t.param, t.grad});
      checkSameNumel(*t.param, *t.grad);
      if (momentum != 0.0f) {
        checkSameDevice({t.param, t.momentum_buffer});
        checkSameNumel(*t.param, *t.momentum_buffer);
      }
      param_ptrs.push_back(t.param->data<float>());
      grad_ptrs.push_back(t.grad->data<float>());
      buffer_ptrs.push_back(momentum != 0.0f ? t.momentum_buffer->data<float>() : nullptr);
      sizes.push_back(t.param->numel());
    }
    cuda::sgdStepMulti(param_ptrs.data(), grad_ptrs.data(), buffer_ptrs.data(), sizes.data(),
                       static_cast<int64_t>(sizes.size()), lr, momentum, dampening, weight_decay,
                       nesterov, first_step);
    return;
  }
#endif
  Tensor none;
  for (const SgdTensors& t : tensors)
    sgdStep(*t.param, *t.grad, t.momentum_buffer != nullptr ? *t.momentum_buffer : none, lr,
            momentum, dampening, weight_decay, nesterov, first_step);
}

// ------------------------------------------------------------------------------------------------
// Transformer ops

namespace {

// The sizes of a batched product op(a_i) op(b_i) -> c_i, checked: m x k by k x n, the same batch.
struct BatchedSizes {
  int64_t batch, m, n, k;
};

BatchedSizes batchedSizes(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                          const Tensor& c) {
  RM_CHECK_ARG(a.rank() >= 2 && b.rank() >= 2 && c.rank() >= 2,
               fmt::format("batched matmul takes tensors of rank 2 or more, got {}, {} and {}",
                           shapeStr(a.shape()), shapeStr(b.shape()), shapeStr(c.shape())));
  const auto rows = [](const Tensor& t) { return t.dim(static_cast<int>(t.rank() - 2)); };
  const auto cols = [](const Tensor& t) { return t.dim(static_cast<int>(t.rank() - 1)); };
  const BatchedSizes sizes{.batch = leadingNumel(c),
                           .m = trans_a ? cols(a) : rows(a),
                           .n = trans_b ? rows(b) : cols(b),
                           .k = trans_a ? rows(a) : cols(a)};
  const int64_t kb = trans_b ? cols(b) : rows(b);
  RM_CHECK_ARG(sizes.k == kb && rows(c) == sizes.m && cols(c) == sizes.n &&
                   leadingNumel(a) == sizes.batch && leadingNumel(b) == sizes.batch,
               fmt::format("batched matmul shapes {}{} x {}{} -> {} do not agree",
                           shapeStr(a.shape()), trans_a ? "^T" : "", shapeStr(b.shape()),
                           trans_b ? "^T" : "", shapeStr(c.shape())));
  return sizes;
}

}  // namespace

void matmulBatched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                   float alpha, float beta) {
  checkSameDevice({&a, &b, &c});
  const auto [batch, m, n, k] = batchedSizes(a, trans_a, b, trans_b, c);
  checkMatmulDTypes(a, b, c, "batched matmul");
  if (a.dtype() == DType::kF32) {
    RM_DISPATCH(c.device(), gemmBatched, trans_a, trans_b, batch, m, n, k, alpha, a.data<float>(),
                m * k, b.data<float>(), k * n, beta, c.data<float>(), m * n);
  } else {
    RM_DISPATCH(c.device(), gemmBatchedLowPrecision, a.dtype(), trans_a, trans_b, batch, m, n, k,
                alpha, bits16(a), m * k, bits16(b), k * n, beta, c.data<float>(), m * n);
  }
}

void matmulBatchedCausal(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                         bool causal_a) {
  checkSameDevice({&a, &b, &c});
  checkDType(a, DType::kF32, "a causal batched matmul's a");
  checkDType(b, DType::kF32, "a causal batched matmul's b");
  checkDType(c, DType::kF32, "a causal batched matmul's c");
  const auto [batch, m, n, k] = batchedSizes(a, trans_a, b, trans_b, c);
  RM_CHECK_ARG(causal_a ? m == k : m == n,
               fmt::format("causal batched matmul shapes {}{} x {}{} -> {} do not agree (the {} "
                           "must be square)",
                           shapeStr(a.shape()), trans_a ? "^T" : "", shapeStr(b.shape()),
                           trans_b ? "^T" : "", shapeStr(c.shape()), causal_a ? "a" : "c"));
  RM_DISPATCH(c.device(), gemmBatchedCausal, causal_a, trans_a, trans_b, batch, m, n, k,
              a.data<float>(), m * k, b.data<float>(), k * n, c.data<float>(), m * n);
}

void geluTanh(const Tensor& x, Tensor& y) {
  checkSameDevice({&x, &y});
  checkSameNumel(x, y);
  RM_DISPATCH(y.device(), geluTanh, x.data<float>(), y.data<float>(), y.numel());
}

void geluTanhBackward(const Tensor& x, const Tensor& dy, Tensor& dx) {
  checkSameDevice({&x, &dy, &dx});
  checkSameNumel(x, dy);
  checkSameNumel(x, dx);
  RM_DISPATCH(dx.device(), geluTanhBackward, x.data<float>(), dy.data<float>(), dx.data<float>(),
              dx.numel());
}

void embeddingForward(const Tensor& ids, const Tensor& table, Tensor& out) {
  checkSameDevice({&ids, &table, &out});
  checkDType(ids, DType::kI32, "token ids");
  RM_CHECK_ARG(table.rank() == 2, fmt::format("embedding table must be [vocab, dim], got {}",
                                              shapeStr(table.shape())));
  const int64_t dim = table.dim(1);
  RM_CHECK_ARG(out.numel() == ids.numel() * dim,
               fmt::format("embedding of ids {} from table {} into {}", shapeStr(ids.shape()),
                           shapeStr(table.shape()), shapeStr(out.shape())));
  RM_DISPATCH(out.device(), embeddingForward, ids.data<int32_t>(), table.data<float>(),
              out.data<float>(), ids.numel(), dim, table.dim(0));
}

void embeddingBackward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  checkSameDevice({&ids, &dout, &dtable});
  checkDType(ids, DType::kI32, "token ids");
  RM_CHECK_ARG(dtable.rank() == 2, fmt::format("embedding gradient must be [vocab, dim], got {}",
                                               shapeStr(dtable.shape())));
  const int64_t dim = dtable.dim(1);
  RM_CHECK_ARG(
      dout.numel() == ids.numel() * dim,
      fmt::format("embedding backward of ids {} with gradient {} into {}", shapeStr(ids.shape()),
                  shapeStr(dout.shape()), shapeStr(dtable.shape())));
  RM_DISPATCH(dtable.device(), embeddingBackward, ids.data<int32_t>(), dout.data<float>(),
              dtable.data<float>(), ids.numel(), dim);
}

void addPositionRows(Tensor& y, const Tensor& pos) {
  checkSameDevice({&y, &pos});
  RM_CHECK_ARG(y.rank() == 3 && pos.rank() == 2 && pos.dim(1) == y.dim(2) && pos.dim(0) >= y.dim(1),
               fmt::format("position rows {} for activations {} (want [B, T, C] and [P >= T, C])",
                           shapeStr(pos.shape()), shapeStr(y.shape())));
  RM_DISPATCH(y.device(), addPositionRows, y.data<float>(), pos.data<float>(), y.dim(0), y.dim(1),
              y.dim(2));
}

void positionRowsBackward(const Tensor& dy, Tensor& dpos) {
  checkSameDevice({&dy, &dpos});
  RM_CHECK_ARG(
      dy.rank() == 3 && dpos.rank() == 2 && dpos.dim(1) == dy.dim(2) && dpos.dim(0) >= dy.dim(1),
      fmt::format("position gradient {} for gradient {} (want [B, T, C] and [P >= T, C])",
                  shapeStr(dpos.shape()), shapeStr(dy.shape())));
  RM_DISPATCH(dy.device(), positionRowsBackward, dy.data<float>(), dpos.data<float>(), dy.dim(0),
              dy.dim(1), dy.dim(2));
}

void splitQkv(const Tensor& qkv, Tensor& q, Tensor& k, Tensor& v) {
  checkSameDevice({&qkv, &q, &k, &v});
  RM_CHECK_ARG(q.rank() == 4, fmt::format("q must be [B, H, T, D], got {}", shapeStr(q.shape())));
  const int64_t batch = q.dim(0), heads = q.dim(1), tokens = q.dim(2), head_dim = q.dim(3);
  checkShape(k, q.shape(), "k");
  checkShape(v, q.shape(), "v");
  checkShape(qkv, {batch, tokens, 3 * heads * head_dim}, "qkv");
  RM_DISPATCH(qkv.device(), splitQkv, qkv.data<float>(), q.data<float>(), k.data<float>(),
              v.data<float>(), batch, tokens, heads, head_dim);
}

void mergeQkv(const Tensor& dq, const Tensor& dk, const Tensor& dv, Tensor& dqkv) {
  checkSameDevice({&dq, &dk, &dv, &dqkv});
  RM_CHECK_ARG(dq.rank() == 4,
               fmt::format("dq must be [B, H, T, D], got {}", shapeStr(dq.shape())));
  const int64_t batch = dq.dim(0), heads = dq.dim(1), tokens = dq.dim(2), head_dim = dq.dim(3);
  checkShape(dk, dq.shape(), "dk");
  checkShape(dv, dq.shape(), "dv");
  checkShape(dqkv, {batch, tokens, 3 * heads * head_dim}, "dqkv");
  RM_DISPATCH(dqkv.device(), mergeQkv, dq.data<float>(), dk.data<float>(), dv.data<float>(),
              dqkv.data<float>(), batch, tokens, heads, head_dim);
}

void permute0213(const Tensor& x, Tensor& y) {
  checkSameDevice({&x, &y});
  RM_CHECK_ARG(x.rank() == 4,
               fmt::format("permute0213 takes a rank-4 tensor, got {}", shapeStr(x.shape())));
  checkShape(y, {x.dim(0), x.dim(2), x.dim(1), x.dim(3)}, "permute0213's output");
  RM_DISPATCH(y.device(), permute0213, x.data<float>(), y.data<float>(), x.dim(0), x.dim(1),
              x.dim(2), x.dim(3));
}

void causalSoftmaxForward(const Tensor& scores, Tensor& probs, float scale) {
  checkSameDevice({&scores, &probs});
  RM_CHECK_ARG(scores.rank() >= 2 && scores.dim(static_cast<int>(scores.rank() - 1)) ==
                                         scores.dim(static_cast<int>(scores.rank() - 2)),
               fmt::format("causal softmax takes square [..., T, T] scores, got {}",
                           shapeStr(scores.shape())));
  checkShape(probs, scores.shape(), "causal softmax's probs");
  const int64_t tokens = scores.dim(static_cast<int>(scores.rank() - 1));
  RM_DISPATCH(scores.device(), causalSoftmaxForward, scores.data<float>(), probs.data<float>(),
              leadingNumel(scores), tokens, scale);
}

void causalSoftmaxBackward(const Tensor& probs, const Tensor& dprobs, Tensor& dscores,
                           float scale) {
  checkSameDevice({&probs, &dprobs, &dscores});
  RM_CHECK_ARG(probs.rank() >= 2 && probs.dim(static_cast<int>(probs.rank() - 1)) ==
                                        probs.dim(static_cast<int>(probs.rank() - 2)),
               fmt::format("causal softmax takes square [..., T, T] probs, got {}",
                           shapeStr(probs.shape())));
  checkShape(dprobs, probs.shape(), "causal softmax's dprobs");
  checkShape(dscores, probs.shape(), "causal softmax's dscores");
  const int64_t tokens = probs.dim(static_cast<int>(probs.rank() - 1));
  RM_DISPATCH(probs.device(), causalSoftmaxBackward, probs.data<float>(), dprobs.data<float>(),
              dscores.data<float>(), leadingNumel(probs), tokens, scale);
}

// ------------------------------------------------------------------------------------------------
// Mixed precision

void cast(const Tensor& x, Tensor& out) {
  checkSameDevice({&x, &out});
  checkSameNumel(x, out);
  if (x.dtype() == out.dtype()) {
    if (x.raw() != out.raw()) out.copyFrom(x);
    return;
  }
  if (x.dtype() == DType::kF32 && isLowPrecision(out.dtype())) {
    RM_DISPATCH(x.device(), castFromFloat, x.data<float>(), bits16(out), x.numel(), out.dtype());
  } else if (isLowPrecision(x.dtype()) && out.dtype() == DType::kF32) {
    RM_DISPATCH(x.device(), castToFloat, bits16(x), out.data<float>(), x.numel(), x.dtype());
  } else {
    RM_THROW(kInvalidArgument,
             fmt::format("no cast from {} to {} (casts are F32 to and from BF16 or F16)",
                         dtypeName(x.dtype()), dtypeName(out.dtype())));
  }
}

Tensor cast(const Tensor& x, DType dtype) {
  RM_CHECK_ARG(x.defined(), "undefined tensor passed to cast");
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  cast(x, out);
  return out;
}

void roundThrough(Tensor& y, DType format) {
  RM_CHECK_ARG(isLowPrecision(format),
               fmt::format("roundThrough takes the format BF16 or F16, got {}", dtypeName(format)));
  checkDType(y, DType::kF32, "roundThrough's tensor");
  RM_DISPATCH(y.device(), roundThrough, y.data<float>(), y.numel(), format);
}

int64_t countNonFinite(const Tensor& x) {
  RM_CHECK_ARG(x.defined(), "undefined tensor passed to countNonFinite");
  checkDType(x, DType::kF32, "countNonFinite's tensor");
  return RM_DISPATCH(x.device(), countNonFinite, x.data<float>(), x.numel());
}

}  // namespace ringmaster::ops
