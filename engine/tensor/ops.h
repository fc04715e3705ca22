// Tensor-level math: shape checks, then dispatch to the host or CUDA kernel of kernels.inc by the
// tensors' device. Layers and optimizers call these and never a kernel directly.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ringmaster::ops {

// c = alpha * op(a) op(b) + beta * c for 2-D tensors (op = transpose when the flag is set).
// a and b are both F32, or both BF16 or both F16 (products accumulated in fp32); c is F32.
void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
            float alpha = 1.0f, float beta = 0.0f);
void fill(Tensor& y, float value);
void addBiasRows(Tensor& y, const Tensor& bias);
// out = beta * out + sum over the rows of x
void sumRows(const Tensor& x, Tensor& out, float beta);
void axpy(float alpha, const Tensor& x, Tensor& y);
void scale(Tensor& y, float alpha);
void mul(const Tensor& a, const Tensor& b, Tensor& out);
double sumSquares(const Tensor& x);

void relu(const Tensor& x, Tensor& y);
void reluBackward(const Tensor& x, const Tensor& dy, Tensor& dx);
void gelu(const Tensor& x, Tensor& y);
void geluBackward(const Tensor& x, const Tensor& dy, Tensor& dx);
void dropout(const Tensor& x, Tensor& y, Tensor& mask, float p, uint64_t seed, uint64_t offset);

void layerNormForward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                      Tensor& mean, Tensor& rstd, float eps);
void layerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta);

double softmaxCrossEntropyForward(const Tensor& logits, const Tensor& labels, Tensor& probs);
void softmaxCrossEntropyBackward(const Tensor& probs, const Tensor& labels, Tensor& dlogits,
                                 float scale);
int64_t countCorrect(const Tensor& logits, const Tensor& labels);

void sgdStep(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, float lr, float momentum,
             float dampening, float weight_decay, bool nesterov, bool first_step);
void adamStep(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, float lr,
              float beta1, float beta2, float eps, float weight_decay, int64_t step,
              bool decoupled);
// The same steps over many tensors of one device at once (torch.optim's foreach / fused form): on
// CUDA one kernel launch for them all, on the host adamStep / sgdStep per tensor. The results are
// those of the per-tensor ops, bit for bit. `momentum_buffers` is ignored when momentum is 0.
struct AdamTensors {
  Tensor* param;
  const Tensor* grad;
  Tensor* exp_avg;
  Tensor* exp_avg_sq;
};
void adamStepMulti(const std::vector<AdamTensors>& tensors, float lr, float beta1, float beta2,
                   float eps, float weight_decay, int64_t step, bool decoupled);
struct SgdTensors {
  Tensor* param;
  const Tensor* grad;
  Tensor* momentum_buffer;  // null when momentum is 0
};
void sgdStepMulti(const std::vector<SgdTensors>& tensors, float lr, float momentum, float dampening,
                  float weight_decay, bool nesterov, bool first_step);

// ------------------------------------------------------------------------------------------------
// Transformer ops (kernels.inc's second half). B batch, T tokens, H heads, D head width, C = H * D.

// Batched matmul: c_i = alpha * op(a_i) op(b_i) + beta * c_i, where each tensor's last two axes are
// the matrices and its leading axes (their product, equal for a, b and c) the batch; a rank-2
// tensor is a batch of one. E.g. scores [B, H, T, T] = q [B, H, T, D] x k [B, H, T, D]^T.
// dtypes as matmul's: a and b F32, BF16 or F16 alike, c F32.
void matmulBatched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                   float alpha = 1.0f, float beta = 0.0f);
// c_i = op(a_i) op(b_i) for causal attention, whose [T, T] matrices are lower triangular:
// with causal_a every a_i is zero above its diagonal (the probabilities, the scores' gradient),
// else c_i is the causal matrix and only its entries on and below the diagonal are written
// (those above are unspecified). The host skips the masked blocks; the values written are those
// of matmulBatched to rounding (only exact zeros are left out of the sums, but OpenBLAS may sum a
// small block's products in another order than the whole matrix's). F32 only.
void matmulBatchedCausal(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                         bool causal_a);

// GELU with the tanh approximation (GPT-2's gelu_new, PyTorch's approximate="tanh").
void geluTanh(const Tensor& x, Tensor& y);
void geluTanhBackward(const Tensor& x, const Tensor& dy, Tensor& dx);

// out[..., :] = table[ids[...], :]: ids I32 of any shape, table [V, C], out ids.numel() x C
// elements (e.g. [B, T, C]). An id outside [0, V) is a kInvalidArgument error naming it.
void embeddingForward(const Tensor& ids, const Tensor& table, Tensor& out);
// dtable[ids[i], :] += dout[i, :] (adds; the ids were checked by the forward).
void embeddingBackward(const Tensor& ids, const Tensor& dout, Tensor& dtable);
// y[b, t, :] += pos[t, :] for y [B, T, C] and pos [P, C] with P >= T (the first T rows are used:
// the learned position table is [context, C] and a batch may be shorter).
void addPositionRows(Tensor& y, const Tensor& pos);
// dpos[t, :] += sum over b of dy[b, t, :], for t < T (rows of dpos past T are left alone).
void positionRowsBackward(const Tensor& dy, Tensor& dpos);

// qkv [B, T, 3C] into q, k, v [B, H, T, D] (H and D read from q's shape).
void splitQkv(const Tensor& qkv, Tensor& q, Tensor& k, Tensor& v);
// dq, dk, dv [B, H, T, D] into dqkv [B, T, 3C] (the backward of splitQkv).
void mergeQkv(const Tensor& dq, const Tensor& dk, const Tensor& dv, Tensor& dqkv);
// y [n0, n2, n1, n3] = x [n0, n1, n2, n3] with axes 1 and 2 swapped.
void permute0213(const Tensor& x, Tensor& y);

// Causal softmax over the last axis of scores [..., T, T]: row i keeps columns j <= i,
// probs = softmax(scale * scores) there and 0 above the diagonal.
void causalSoftmaxForward(const Tensor& scores, Tensor& probs, float scale);
// dscores = scale * probs * (dprobs - rowsum(probs * dprobs)), 0 above the diagonal.
void causalSoftmaxBackward(const Tensor& probs, const Tensor& dprobs, Tensor& dscores, float scale);

// ------------------------------------------------------------------------------------------------
// Mixed precision: conversions between F32 and the 16-bit formats (BF16, F16), on any device.

// out = x converted to out's dtype: F32 to BF16 / F16 (round to nearest even; fp16 overflow is
// +-inf), BF16 / F16 to F32 (exact), or a copy when the dtypes are equal. Same numel and device.
void cast(const Tensor& x, Tensor& out);
// x in `dtype`: x itself (shared) when it already is, else a new tensor from cast().
Tensor cast(const Tensor& x, DType dtype);
// y's F32 values rounded through `format` (BF16 or F16) in place.
void roundThrough(Tensor& y, DType format);
// Elements of an F32 tensor that are +-inf or NaN.
int64_t countNonFinite(const Tensor& x);

}  // namespace ringmaster::ops
