// Tensor-level math: shape checks, then dispatch to the host or CUDA kernel of kernels.inc by the
// tensors' device. Layers and optimizers call these and never a kernel directly.
#pragma once

#include "tensor/tensor.h"

namespace ringmaster::ops {

// c = alpha * op(a) op(b) + beta * c for 2-D tensors (op = transpose when the flag is set).
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
void layerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                       const Tensor& rstd, const Tensor& dy, Tensor& dx, Tensor& dgamma,
                       Tensor& dbeta);

double softmaxCrossEntropyForward(const Tensor& logits, const Tensor& labels, Tensor& probs);
void softmaxCrossEntropyBackward(const Tensor& probs, const Tensor& labels, Tensor& dlogits,
                                 float scale);
int64_t countCorrect(const Tensor& logits, const Tensor& labels);

void sgdStep(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, float lr, float momentum,
             float dampening, float weight_decay, bool nesterov, bool first_step);
void adamStep(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, float lr,
              float beta1, float beta2, float eps, float weight_decay, int64_t step,
              bool decoupled);

}  // namespace ringmaster::ops
