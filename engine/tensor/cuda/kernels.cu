// The CUDA implementation of kernels.inc: GEMM through cuBLAS, everything else as small kernels on
// the default stream, one section per op, each following cpu_kernels.cpp (the reference the tests
// compare against) formula for formula. Kernels that return a value synchronise; none is tuned
// beyond grid-stride loops and one block per row, on purpose: readability first.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "tensor/allocator.h"
#include "tensor/cuda/cublas_library.h"
#include "tensor/cuda/cuda_runtime.h"
#include "tensor/kernels.h"

namespace ringmaster::cuda {

namespace {

// ------------------------------------------------------------------------------------------------
// Launch helpers, block reductions, scratch memory

constexpr int kThreads = 256;  // threads per block: a multiple of the warp size
constexpr int kWarpSize = 32;
constexpr int64_t kMaxBlocks = 4096;      // elementwise grids; grid-stride loops do the rest
constexpr int64_t kMaxRowBlocks = 65535;  // one-block-per-row grids; rows past it loop

// Blocks for a grid-stride loop over n elements (n > 0).
int blocksFor(int64_t n) {
  return static_cast<int>(std::min((n + kThreads - 1) / kThreads, kMaxBlocks));
}

// Blocks for a kernel with one block per row (rows > 0).
int rowBlocksFor(int64_t rows) {
  return static_cast<int>(std::min(rows, kMaxRowBlocks));
}

__device__ int64_t firstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t gridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces `value` over the block with `op` (identity `identity`) and returns the result to every
// thread. Every thread of the block must call it: it synchronises, and may be called again at once.
template <typename T, typename Op>
__device__ T blockReduce(T value, T identity, Op op) {
  __shared__ T warp_results[kWarpSize];
  __shared__ T result;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
  }
  if (lane == 0) warp_results[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < static_cast<int>(blockDim.x) / kWarpSize ? warp_results[lane] : identity;
    for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
      value = op(value, __shfl_down_sync(0xffffffffu, value, offset));
    }
    if (lane == 0) result = value;
  }
  __syncthreads();
  const T total = result;
  __syncthreads();  // everyone has read `result` before a next call overwrites it
  return total;
}

__device__ double blockSum(double value) {
  return blockReduce(value, 0.0, Add{});
}
__device__ float blockMax(float value) {
  return blockReduce(value, -INFINITY, Max{});
}

int currentDevice() {
  int device = 0;
  RM_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

// A short-lived buffer on the current device for results reduced on the host, taken from the
// device's caching allocator: it shows in the memory figures, and once cached costs no cudaMalloc.
class Scratch {
 public:
  explicit Scratch(size_t bytes)
      : device_(Device::cuda(currentDevice())), ptr_(allocatorFor(device_).allocate(bytes)) {}
  ~Scratch() { allocatorFor(device_).deallocate(ptr_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  template <typename T>
  T* as() {
    return static_cast<T*>(ptr_);
  }

 private:
  Device device_;
  void* ptr_;
};

// Copies n elements to the host. cudaMemcpy waits for the kernels queued before it.
template <typename T>
std::vector<T> toHost(const T* device_ptr, int64_t n) {
  std::vector<T> host(static_cast<size_t>(n));
  if (n > 0) {
    RM_CUDA_CHECK(
        cudaMemcpy(host.data(), device_ptr, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
  }
  return host;
}

// The host's label check, with the host's message, on a copy of the labels.
void checkLabels(const int32_t* labels, int64_t rows, int64_t cols) {
  const std::vector<int32_t> host = toHost(labels, rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (host[r] < 0 || host[r] >= cols) {
      RM_THROW(kInvalidArgument,
               fmt::format("label {} of row {} is outside [0, {})", host[r], r, cols));
    }
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// gemm

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no products: C = beta * C, where beta = 0 clears NaN and Inf as on the host
    scale(c, beta, m * n);
    return;
  }
  RM_CHECK_ARG(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX,
               fmt::format("gemm of {} x {} x {} exceeds cuBLAS's 32-bit sizes", m, n, k));
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  // cuBLAS is column-major, and a row-major matrix read column-major is its transpose. So compute
  // C^T = op(B)^T op(A)^T: B's buffer goes first, and m and n trade places.
  RM_CUBLAS_CHECK(cublas().sgemm(cublasHandle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                                 static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, a, lda,
                                 &beta, c, static_cast<int>(n)));
}

// ------------------------------------------------------------------------------------------------
// fill, addBiasRows, sumRows

namespace {

__global__ void fillKernel(float* y, int64_t n, float value) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) y[i] = value;
}

__global__ void addBiasRowsKernel(float* y, const float* bias, int64_t n, int64_t cols) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) y[i] += bias[i % cols];
}

// One thread per column walks down the rows in order: each column is summed in the host's order.
__global__ void sumRowsKernel(const float* x, float* out, int64_t rows, int64_t cols, float beta) {
  for (int64_t c = firstIndex(); c < cols; c += gridStride()) {
    float sum = beta == 0.0f ? 0.0f : beta * out[c];
    for (int64_t r = 0; r < rows; ++r) sum += x[r * cols + c];
    out[c] = sum;
  }
}

}  // namespace

void fill(float* y, int64_t n, float value) {
  if (n <= 0) return;
  fillKernel<<<blocksFor(n), kThreads>>>(y, n, value);
  RM_CUDA_CHECK(cudaGetLastError());
}

void addBiasRows(float* y, const float* bias, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  addBiasRowsKernel<<<blocksFor(n), kThreads>>>(y, bias, n, cols);
  RM_CUDA_CHECK(cudaGetLastError());
}

void sumRows(const float* x, float* out, int64_t rows, int64_t cols, float beta) {
  if (cols <= 0) return;
  sumRowsKernel<<<blocksFor(cols), kThreads>>>(x, out, rows, cols, beta);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// axpy, scale, mul

namespace {

__global__ void axpyKernel(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) y[i] += alpha * x[i];
}

__global__ void scaleKernel(float* y, float alpha, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) y[i] *= alpha;
}

__global__ void mulKernel(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) out[i] = a[i] * b[i];
}

}  // namespace

void axpy(float alpha, const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  axpyKernel<<<blocksFor(n), kThreads>>>(alpha, x, y, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

void scale(float* y, float alpha, int64_t n) {
  if (alpha == 0.0f) {
    fill(y, n, 0.0f);  // like BLAS: alpha = 0 clears NaN and Inf too
    return;
  }
  if (n <= 0) return;
  scaleKernel<<<blocksFor(n), kThreads>>>(y, alpha, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

void mul(const float* a, const float* b, float* out, int64_t n) {
  if (n <= 0) return;
  mulKernel<<<blocksFor(n), kThreads>>>(a, b, out, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// sumSquares: per-block sums in double, added on the host in block order (deterministic)

namespace {

__global__ void sumSquaresKernel(const float* x, int64_t n, double* block_sums) {
  double sum = 0.0;
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    sum += static_cast<double>(x[i]) * x[i];
  }
  sum = blockSum(sum);
  if (threadIdx.x == 0) block_sums[blockIdx.x] = sum;
}

}  // namespace

double sumSquares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  const int blocks = blocksFor(n);
  Scratch block_sums(blocks * sizeof(double));
  sumSquaresKernel<<<blocks, kThreads>>>(x, n, block_sums.as<double>());
  RM_CUDA_CHECK(cudaGetLastError());
  double sum = 0.0;
  for (double s : toHost(block_sums.as<double>(), blocks)) sum += s;
  return sum;
}

// ------------------------------------------------------------------------------------------------
// relu, gelu

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

__global__ void reluKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void reluBackwardKernel(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void geluKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * kInvSqrt2));
  }
}

__global__ void geluBackwardKernel(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float cdf = 0.5f * (1.0f + erff(x[i] * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x[i] * x[i]);
    dx[i] = dy[i] * (cdf + x[i] * pdf);
  }
}

}  // namespace

void relu(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  reluKernel<<<blocksFor(n), kThreads>>>(x, y, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

void reluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  if (n <= 0) return;
  reluBackwardKernel<<<blocksFor(n), kThreads>>>(x, dy, dx, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

void gelu(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  geluKernel<<<blocksFor(n), kThreads>>>(x, y, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

void geluBackward(const float* x, const float* dy, float* dx, int64_t n) {
  if (n <= 0) return;
  geluBackwardKernel<<<blocksFor(n), kThreads>>>(x, dy, dx, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// dropout: the same counter-based draws as the host, so the masks are equal bit for bit

namespace {

__global__ void dropoutKernel(const float* x, float* y, float* mask, int64_t n, float p,
                              float keep_scale, uint64_t seed, uint64_t offset) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float m = uniformFloat(seed, offset + static_cast<uint64_t>(i)) >= p ? keep_scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

}  // namespace

void dropout(const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed,
             uint64_t offset) {
  if (n <= 0) return;
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;  // on the host, as the host does
  dropoutKernel<<<blocksFor(n), kThreads>>>(x, y, mask, n, p, keep_scale, seed, offset);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// layer norm: one block per row, row sums in double

namespace {

__global__ void layerNormForwardKernel(const float* x, const float* gamma, const float* beta,
                                       float* y, float* mean, float* rstd, int64_t rows,
                                       int64_t cols, float eps) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    double sum = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += xr[c];
    sum = blockSum(sum);
    const double mu = cols > 0 ? sum / cols : 0.0;
    double sum_sq = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      sum_sq += (xr[c] - mu) * (xr[c] - mu);
    }
    sum_sq = blockSum(sum_sq);
    const double var = cols > 0 ? sum_sq / cols : 0.0;
    const float inv = static_cast<float>(1.0 / sqrt(var + eps));
    const float mean_r = static_cast<float>(mu);
    if (threadIdx.x == 0) {
      mean[r] = mean_r;
      rstd[r] = inv;
    }
    float* yr = y + r * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      yr[c] = (xr[c] - mean_r) * inv * gamma[c] + beta[c];
    }
  }
}

// dx, one block per row.
__global__ void layerNormBackwardInputKernel(const float* x, const float* gamma, const float* mean,
                                             const float* rstd, const float* dy, float* dx,
                                             int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (xr[c] - mean[r]) * rstd[r];
      const float dxhat = dyr[c] * gamma[c];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += static_cast<double>(dxhat) * xhat;
    }
    sum_dxhat = blockSum(sum_dxhat);
    sum_dxhat_xhat = blockSum(sum_dxhat_xhat);
    const float mean_dxhat = static_cast<float>(sum_dxhat / cols);
    const float mean_dxhat_xhat = static_cast<float>(sum_dxhat_xhat / cols);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xhat = (xr[c] - mean[r]) * rstd[r];
      dxr[c] = rstd[r] * (dyr[c] * gamma[c] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

// dgamma and dbeta, one thread per column adding the rows in the host's order.
__global__ void layerNormBackwardWeightsKernel(const float* x, const float* mean, const float* rstd,
                                               const float* dy, float* dgamma, float* dbeta,
                                               int64_t rows, int64_t cols) {
  for (int64_t c = firstIndex(); c < cols; c += gridStride()) {
    float dg = dgamma[c], db = dbeta[c];
    for (int64_t r = 0; r < rows; ++r) {
      const float xhat = (x[r * cols + c] - mean[r]) * rstd[r];
      dg += dy[r * cols + c] * xhat;
      db += dy[r * cols + c];
    }
    dgamma[c] = dg;
    dbeta[c] = db;
  }
}

}  // namespace

void layerNormForward(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                      float* rstd, int64_t rows, int64_t cols, float eps) {
  if (rows <= 0) return;  // cols = 0 still writes mean = 0 and rstd = 1/sqrt(eps), as the host
  layerNormForwardKernel<<<rowBlocksFor(rows), kThreads>>>(x, gamma, beta, y, mean, rstd, rows,
                                                           cols, eps);
  RM_CUDA_CHECK(cudaGetLastError());
}

void layerNormBackward(const float* x, const float* gamma, const float* mean, const float* rstd,
                       const float* dy, float* dx, float* dgamma, float* dbeta, int64_t rows,
                       int64_t cols) {
  if (rows <= 0 || cols <= 0) return;  // nothing to write, nothing to add
  layerNormBackwardInputKernel<<<rowBlocksFor(rows), kThreads>>>(x, gamma, mean, rstd, dy, dx, rows,
                                                                 cols);
  RM_CUDA_CHECK(cudaGetLastError());
  layerNormBackwardWeightsKernel<<<blocksFor(cols), kThreads>>>(x, mean, rstd, dy, dgamma, dbeta,
                                                                rows, cols);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// softmax cross-entropy: one block per row; per-row losses summed on the host in double

namespace {

__global__ void softmaxCrossEntropyForwardKernel(const float* logits, const int32_t* labels,
                                                 float* probs, double* losses, int64_t rows,
                                                 int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* lr = logits + r * cols;
    float* pr = probs + r * cols;
    float max = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) max = fmaxf(max, lr[c]);
    max = blockMax(max);
    double sum = 0.0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      pr[c] = expf(lr[c] - max);
      sum += pr[c];
    }
    sum = blockSum(sum);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) pr[c] *= inv;
    if (threadIdx.x == 0) losses[r] = -(static_cast<double>(lr[labels[r]]) - max - log(sum));
  }
}

__global__ void softmaxCrossEntropyBackwardKernel(const float* probs, const int32_t* labels,
                                                  float* dlogits, int64_t n, int64_t cols,
                                                  float scale) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    const int64_t r = i / cols, c = i % cols;
    dlogits[i] = (probs[i] - (c == labels[r] ? 1.0f : 0.0f)) * scale;
  }
}

}  // namespace

double softmaxCrossEntropyForward(const float* logits, const int32_t* labels, float* probs,
                                  int64_t rows, int64_t cols) {
  if (rows <= 0) return 0.0;
  checkLabels(labels, rows, cols);  // also rules out cols = 0
  Scratch losses(rows * sizeof(double));
  softmaxCrossEntropyForwardKernel<<<rowBlocksFor(rows), kThreads>>>(
      logits, labels, probs, losses.as<double>(), rows, cols);
  RM_CUDA_CHECK(cudaGetLastError());
  double total = 0.0;
  for (double loss : toHost(losses.as<double>(), rows)) total += loss;
  return total / rows;
}

void softmaxCrossEntropyBackward(const float* probs, const int32_t* labels, float* dlogits,
                                 int64_t rows, int64_t cols, float scale) {
  if (rows <= 0) return;
  checkLabels(labels, rows, cols);
  const int64_t n = rows * cols;
  softmaxCrossEntropyBackwardKernel<<<blocksFor(n), kThreads>>>(probs, labels, dlogits, n, cols,
                                                                scale);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// countCorrect: one thread per row, scanning like std::max_element (the first largest wins)

namespace {

__global__ void countCorrectKernel(const float* logits, const int32_t* labels, int64_t rows,
                                   int64_t cols, unsigned long long* correct) {
  for (int64_t r = firstIndex(); r < rows; r += gridStride()) {
    const float* lr = logits + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c) {
      if (lr[best] < lr[c]) best = c;
    }
    if (best == labels[r]) atomicAdd(correct, 1ull);
  }
}

}  // namespace

int64_t countCorrect(const float* logits, const int32_t* labels, int64_t rows, int64_t cols) {
  if (rows <= 0) return 0;
  Scratch correct(sizeof(unsigned long long));
  RM_CUDA_CHECK(cudaMemset(correct.as<unsigned long long>(), 0, sizeof(unsigned long long)));
  countCorrectKernel<<<blocksFor(rows), kThreads>>>(logits, labels, rows, cols,
                                                    correct.as<unsigned long long>());
  RM_CUDA_CHECK(cudaGetLastError());
  return static_cast<int64_t>(toHost(correct.as<unsigned long long>(), 1)[0]);
}

// ------------------------------------------------------------------------------------------------
// sgdStep, adamStep: one thread per element, the host's formulas; and their multi-tensor forms

namespace {

// One element of sgdStep / adamStep: the single- and multi-tensor kernels share it, so that the
// two give the same bits.
__device__ void sgdElement(float* param, const float* grad, float* momentum_buffer, int64_t i,
                           float lr, float momentum, float dampening, float weight_decay,
                           bool nesterov, bool first_step) {
  float g = grad[i] + weight_decay * param[i];
  if (momentum != 0.0f) {
    const float buf = first_step ? g : momentum * momentum_buffer[i] + (1.0f - dampening) * g;
    momentum_buffer[i] = buf;
    g = nesterov ? g + momentum * buf : buf;
  }
  param[i] -= lr * g;
}

// Adam's per-step scalars, computed on the host exactly as the host kernel computes them.
struct AdamScalars {
  float beta1, beta2, eps, weight_decay;
  bool decoupled;
  float decay;  // AdamW's multiplier, 1 - lr * weight_decay
  float step_size;
  float bias_correction2_sqrt;
};

AdamScalars adamScalars(float lr, float beta1, float beta2, float eps, float weight_decay,
                        int64_t step, bool decoupled) {
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), step);
  return AdamScalars{.beta1 = beta1,
                     .beta2 = beta2,
                     .eps = eps,
                     .weight_decay = weight_decay,
                     .decoupled = decoupled,
                     .decay = 1.0f - lr * weight_decay,
                     .step_size = static_cast<float>(lr / bias_correction1),
                     .bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2))};
}

__device__ void adamElement(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                            int64_t i, const AdamScalars& a) {
  float g = grad[i];
  if (a.decoupled) {
    param[i] *= a.decay;
  } else {
    g += a.weight_decay * param[i];
  }
  const float m = exp_avg[i] + (1.0f - a.beta1) * (g - exp_avg[i]);
  const float v = a.beta2 * exp_avg_sq[i] + (1.0f - a.beta2) * g * g;
  exp_avg[i] = m;
  exp_avg_sq[i] = v;
  const float denom = sqrtf(v) / a.bias_correction2_sqrt + a.eps;
  param[i] -= a.step_size * m / denom;
}

__global__ void sgdStepKernel(float* param, const float* grad, float* momentum_buffer, int64_t n,
                              float lr, float momentum, float dampening, float weight_decay,
                              bool nesterov, bool first_step) {
  for (int64_t i = firstIndex(); i < n; i += gridStride())
    sgdElement(param, grad, momentum_buffer, i, lr, momentum, dampening, weight_decay, nesterov,
               first_step);
}

__global__ void adamStepKernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                               int64_t n, AdamScalars scalars) {
  for (int64_t i = firstIndex(); i < n; i += gridStride())
    adamElement(param, grad, exp_avg, exp_avg_sq, i, scalars);
}

// The multi-tensor kernels (PyTorch's multi_tensor_apply): the tensors are cut into chunks of
// kChunkElements, one block per chunk, and a table on the device says which tensor and where each
// chunk starts; the tensors' pointers sit in a second table.
constexpr int64_t kChunkElements = 16 * 1024;

struct TensorPointers {
  float* param;
  const float* grad;
  float* state_a;  // exp_avg, or SGD's momentum buffer (may be null)
  float* state_b;  // exp_avg_sq
  int64_t n;
};

struct Chunk {
  int64_t tensor;
  int64_t start;
};

__global__ void adamStepMultiKernel(const TensorPointers* tensors, const Chunk* chunks,
                                    AdamScalars scalars) {
  const Chunk chunk = chunks[blockIdx.x];
  const TensorPointers t = tensors[chunk.tensor];
  const int64_t end = min(chunk.start + kChunkElements, t.n);
  for (int64_t i = chunk.start + threadIdx.x; i < end; i += blockDim.x)
    adamElement(t.param, t.grad, t.state_a, t.state_b, i, scalars);
}

__global__ void sgdStepMultiKernel(const TensorPointers* tensors, const Chunk* chunks, float lr,
                                   float momentum, float dampening, float weight_decay,
                                   bool nesterov, bool first_step) {
  const Chunk chunk = chunks[blockIdx.x];
  const TensorPointers t = tensors[chunk.tensor];
  const int64_t end = min(chunk.start + kChunkElements, t.n);
  for (int64_t i = chunk.start + threadIdx.x; i < end; i += blockDim.x)
    sgdElement(t.param, t.grad, t.state_a, i, lr, momentum, dampening, weight_decay, nesterov,
               first_step);
}

// The two tables of a multi-tensor launch, copied to the device in one transfer. The scratch
// memory goes back to the caching allocator after the launch: every user of it is ordered after
// this kernel on the default stream.
class ChunkTables {
 public:
  explicit ChunkTables(const std::vector<TensorPointers>& tensors) {
    std::vector<Chunk> chunks;
    for (size_t i = 0; i < tensors.size(); ++i)
      for (int64_t start = 0; start < tensors[i].n; start += kChunkElements)
        chunks.push_back(Chunk{static_cast<int64_t>(i), start});
    blocks_ = static_cast<int>(chunks.size());
    if (chunks.empty()) return;
    const size_t tensor_bytes = tensors.size() * sizeof(TensorPointers);
    const size_t chunk_bytes = chunks.size() * sizeof(Chunk);
    std::vector<char> host(tensor_bytes + chunk_bytes);
    std::memcpy(host.data(), tensors.data(), tensor_bytes);
    std::memcpy(host.data() + tensor_bytes, chunks.data(), chunk_bytes);
    scratch_.emplace(host.size());
    RM_CUDA_CHECK(
        cudaMemcpy(scratch_->as<char>(), host.data(), host.size(), cudaMemcpyHostToDevice));
    tensors_on_device_ = reinterpret_cast<const TensorPointers*>(scratch_->as<char>());
    chunks_on_device_ = reinterpret_cast<const Chunk*>(scratch_->as<char>() + tensor_bytes);
  }

  int blocks() const { return blocks_; }
  const TensorPointers* tensors() const { return tensors_on_device_; }
  const Chunk* chunks() const { return chunks_on_device_; }

 private:
  int blocks_ = 0;
  std::optional<Scratch> scratch_;
  const TensorPointers* tensors_on_device_ = nullptr;
  const Chunk* chunks_on_device_ = nullptr;
};

}  // namespace

void sgdStep(float* param, const float* grad, float* momentum_buffer, int64_t n, float lr,
             float momentum, float dampening, float weight_decay, bool nesterov, bool first_step) {
  if (n <= 0) return;
  sgdStepKernel<<<blocksFor(n), kThreads>>>(param, grad, momentum_buffer, n, lr, momentum,
                                            dampening, weight_decay, nesterov, first_step);
  RM_CUDA_CHECK(cudaGetLastError());
}

void adamStep(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
              float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step,
              bool decoupled) {
  if (n <= 0) return;
  adamStepKernel<<<blocksFor(n), kThreads>>>(
      param, grad, exp_avg, exp_avg_sq, n,
      adamScalars(lr, beta1, beta2, eps, weight_decay, step, decoupled));
  RM_CUDA_CHECK(cudaGetLastError());
}

void adamStepMulti(float* const* params, const float* const* grads, float* const* exp_avgs,
                   float* const* exp_avg_sqs, const int64_t* sizes, int64_t count, float lr,
                   float beta1, float beta2, float eps, float weight_decay, int64_t step,
                   bool decoupled) {
  std::vector<TensorPointers> tensors;
  for (int64_t i = 0; i < count; ++i)
    tensors.push_back(TensorPointers{params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], sizes[i]});
  ChunkTables tables(tensors);
  if (tables.blocks() == 0) return;
  adamStepMultiKernel<<<tables.blocks(), kThreads>>>(
      tables.tensors(), tables.chunks(),
      adamScalars(lr, beta1, beta2, eps, weight_decay, step, decoupled));
  RM_CUDA_CHECK(cudaGetLastError());
}

void sgdStepMulti(float* const* params, const float* const* grads, float* const* momentum_buffers,
                  const int64_t* sizes, int64_t count, float lr, float momentum, float dampening,
                  float weight_decay, bool nesterov, bool first_step) {
  std::vector<TensorPointers> tensors;
  for (int64_t i = 0; i < count; ++i)
    tensors.push_back(TensorPointers{params[i], grads[i], momentum_buffers[i], nullptr, sizes[i]});
  ChunkTables tables(tensors);
  if (tables.blocks() == 0) return;
  sgdStepMultiKernel<<<tables.blocks(), kThreads>>>(tables.tensors(), tables.chunks(), lr, momentum,
                                                    dampening, weight_decay, nesterov, first_step);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// gemmBatched: cublasSgemmStridedBatched with gemm's row-major trick

void gemmBatched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, int64_t stride_a, const float* b, int64_t stride_b,
                 float beta, float* c, int64_t stride_c) {
  if (batch <= 0 || m == 0 || n == 0) return;
  if (k == 0) {  // no products: every C_i = beta * C_i, as gemm does
    for (int64_t i = 0; i < batch; ++i) scale(c + i * stride_c, beta, m * n);
    return;
  }
  RM_CHECK_ARG(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && batch <= INT_MAX,
               fmt::format("batched gemm of {} x {} x {} x {} exceeds cuBLAS's 32-bit sizes", batch,
                           m, n, k));
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  // As in gemm: C_i^T = op(B_i)^T op(A_i)^T in cuBLAS's column-major view, B first, m and n
  // swapped.
  RM_CUBLAS_CHECK(cublas().sgemmStridedBatched(
      cublasHandle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, stride_b, a,
      lda, stride_a, &beta, c, static_cast<int>(n), stride_c, static_cast<int>(batch)));
}

// Every block computed: the masked ones cost cuBLAS one strided batch, not more launches.
void gemmBatchedCausal(bool causal_a, bool trans_a, bool trans_b, int64_t batch, int64_t m,
                       int64_t n, int64_t k, const float* a, int64_t stride_a, const float* b,
                       int64_t stride_b, float* c, int64_t stride_c) {
  RM_ENFORCE(causal_a ? m == k : m == n,
             fmt::format("a causal product of {} x {} x {} has no square causal matrix", m, n, k));
  gemmBatched(trans_a, trans_b, batch, m, n, k, 1.0f, a, stride_a, b, stride_b, 0.0f, c, stride_c);
}

// ------------------------------------------------------------------------------------------------
// geluTanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))

namespace {

constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kGeluCubic = 0.044715f;

__global__ void geluTanhKernel(const float* x, float* y, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float v = x[i];
    const float inner = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    y[i] = 0.5f * v * (1.0f + tanhf(inner));
  }
}

__global__ void geluTanhBackwardKernel(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float v = x[i];
    const float inner = kSqrt2OverPi * (v + kGeluCubic * v * v * v);
    const float t = tanhf(inner);
    const float dinner = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner);
  }
}

}  // namespace

void geluTanh(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
  geluTanhKernel<<<blocksFor(n), kThreads>>>(x, y, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

void geluTanhBackward(const float* x, const float* dy, float* dx, int64_t n) {
  if (n <= 0) return;
  geluTanhBackwardKernel<<<blocksFor(n), kThreads>>>(x, dy, dx, n);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// embeddings: a gather by token id, its scatter-add (atomicAdd: ids repeat), position rows

namespace {

// The host's id check, on a copy of the ids.
void checkIds(const int32_t* ids, int64_t count, int64_t vocab) {
  const std::vector<int32_t> host = toHost(ids, count);
  for (int64_t i = 0; i < count; ++i) {
    if (host[i] < 0 || host[i] >= vocab) {
      RM_THROW(kInvalidArgument,
               fmt::format("token id {} at position {} is outside the vocabulary [0, {})", host[i],
                           i, vocab));
    }
  }
}

__global__ void embeddingForwardKernel(const int32_t* ids, const float* table, float* out,
                                       int64_t n, int64_t dim) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    out[i] = table[static_cast<int64_t>(ids[i / dim]) * dim + i % dim];
  }
}

__global__ void embeddingBackwardKernel(const int32_t* ids, const float* dout, float* dtable,
                                        int64_t n, int64_t dim) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    atomicAdd(dtable + static_cast<int64_t>(ids[i / dim]) * dim + i % dim, dout[i]);
  }
}

__global__ void addPositionRowsKernel(float* y, const float* pos, int64_t n, int64_t row_block) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) y[i] += pos[i % row_block];
}

// One thread per element of the [T, C] block walks the batch in order, as sumRows does.
__global__ void positionRowsBackwardKernel(const float* dy, float* dpos, int64_t batch,
                                           int64_t row_block) {
  for (int64_t j = firstIndex(); j < row_block; j += gridStride()) {
    float sum = dpos[j];
    for (int64_t b = 0; b < batch; ++b) sum += dy[b * row_block + j];
    dpos[j] = sum;
  }
}

}  // namespace

void embeddingForward(const int32_t* ids, const float* table, float* out, int64_t count,
                      int64_t dim, int64_t vocab) {
  if (count <= 0) return;
  checkIds(ids, count, vocab);
  const int64_t n = count * dim;
  if (n <= 0) return;
  embeddingForwardKernel<<<blocksFor(n), kThreads>>>(ids, table, out, n, dim);
  RM_CUDA_CHECK(cudaGetLastError());
}

void embeddingBackward(const int32_t* ids, const float* dout, float* dtable, int64_t count,
                       int64_t dim) {
  const int64_t n = count * dim;
  if (n <= 0) return;
  embeddingBackwardKernel<<<blocksFor(n), kThreads>>>(ids, dout, dtable, n, dim);
  RM_CUDA_CHECK(cudaGetLastError());
}

void addPositionRows(float* y, const float* pos, int64_t batch, int64_t tokens, int64_t dim) {
  const int64_t n = batch * tokens * dim;
  if (n <= 0) return;
  addPositionRowsKernel<<<blocksFor(n), kThreads>>>(y, pos, n, tokens * dim);
  RM_CUDA_CHECK(cudaGetLastError());
}

void positionRowsBackward(const float* dy, float* dpos, int64_t batch, int64_t tokens,
                          int64_t dim) {
  const int64_t row_block = tokens * dim;
  if (row_block <= 0) return;
  positionRowsBackwardKernel<<<blocksFor(row_block), kThreads>>>(dy, dpos, batch, row_block);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// head layout: splitQkv, mergeQkv, permute0213 (pure copies, one thread per element)

namespace {

// For element i of qkv [B, T, 3, H, D]: which of q, k, v (0, 1, 2) and its offset in [B, H, T, D].
struct QkvIndex {
  int64_t which;
  int64_t offset;
};

__device__ QkvIndex qkvIndex(int64_t i, int64_t tokens, int64_t heads, int64_t head_dim) {
  const int64_t d = i % head_dim;
  int64_t rest = i / head_dim;
  const int64_t h = rest % heads;
  rest /= heads;
  const int64_t which = rest % 3;
  rest /= 3;
  const int64_t t = rest % tokens;
  const int64_t b = rest / tokens;
  return {which, ((b * heads + h) * tokens + t) * head_dim + d};
}

__global__ void splitQkvKernel(const float* qkv, float* q, float* k, float* v, int64_t n,
                               int64_t tokens, int64_t heads, int64_t head_dim) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    const QkvIndex at = qkvIndex(i, tokens, heads, head_dim);
    float* dst = at.which == 0 ? q : at.which == 1 ? k : v;
    dst[at.offset] = qkv[i];
  }
}

__global__ void mergeQkvKernel(const float* dq, const float* dk, const float* dv, float* dqkv,
                               int64_t n, int64_t tokens, int64_t heads, int64_t head_dim) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    const QkvIndex at = qkvIndex(i, tokens, heads, head_dim);
    const float* src = at.which == 0 ? dq : at.which == 1 ? dk : dv;
    dqkv[i] = src[at.offset];
  }
}

__global__ void permute0213Kernel(const float* x, float* y, int64_t n, int64_t n1, int64_t n2,
                                  int64_t n3) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    const int64_t d = i % n3;
    int64_t rest = i / n3;
    const int64_t c = rest % n2;
    rest /= n2;
    const int64_t b = rest % n1;
    const int64_t a = rest / n1;
    y[((a * n2 + c) * n1 + b) * n3 + d] = x[i];
  }
}

}  // namespace

void splitQkv(const float* qkv, float* q, float* k, float* v, int64_t batch, int64_t tokens,
              int64_t heads, int64_t head_dim) {
  const int64_t n = batch * tokens * 3 * heads * head_dim;
  if (n <= 0) return;
  splitQkvKernel<<<blocksFor(n), kThreads>>>(qkv, q, k, v, n, tokens, heads, head_dim);
  RM_CUDA_CHECK(cudaGetLastError());
}

void mergeQkv(const float* dq, const float* dk, const float* dv, float* dqkv, int64_t batch,
              int64_t tokens, int64_t heads, int64_t head_dim) {
  const int64_t n = batch * tokens * 3 * heads * head_dim;
  if (n <= 0) return;
  mergeQkvKernel<<<blocksFor(n), kThreads>>>(dq, dk, dv, dqkv, n, tokens, heads, head_dim);
  RM_CUDA_CHECK(cudaGetLastError());
}

void permute0213(const float* x, float* y, int64_t n0, int64_t n1, int64_t n2, int64_t n3) {
  const int64_t n = n0 * n1 * n2 * n3;
  if (n <= 0) return;
  permute0213Kernel<<<blocksFor(n), kThreads>>>(x, y, n, n1, n2, n3);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// causal softmax: one block per row of the [T, T] matrices, row sums in double

namespace {

__global__ void causalSoftmaxForwardKernel(const float* scores, float* probs, int64_t rows,
                                           int64_t tokens, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t last = r % tokens;  // row i of its matrix sees columns 0..i
    const float* sr = scores + r * tokens;
    float* pr = probs + r * tokens;
    float max = -INFINITY;
    for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) max = fmaxf(max, scale * sr[j]);
    max = blockMax(max);
    double sum = 0.0;
    for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) {
      pr[j] = expf(scale * sr[j] - max);
      sum += pr[j];
    }
    sum = blockSum(sum);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = threadIdx.x; j < tokens; j += blockDim.x) {
      pr[j] = j <= last ? pr[j] * inv : 0.0f;
    }
  }
}

__global__ void causalSoftmaxBackwardKernel(const float* probs, const float* dprobs, float* dscores,
                                            int64_t rows, int64_t tokens, float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t last = r % tokens;
    const float* pr = probs + r * tokens;
    const float* dpr = dprobs + r * tokens;
    float* dsr = dscores + r * tokens;
    double dot = 0.0;
    for (int64_t j = threadIdx.x; j <= last; j += blockDim.x) {
      dot += static_cast<double>(pr[j]) * dpr[j];
    }
    const float dot_r = static_cast<float>(blockSum(dot));
    for (int64_t j = threadIdx.x; j < tokens; j += blockDim.x) {
      dsr[j] = j <= last ? scale * pr[j] * (dpr[j] - dot_r) : 0.0f;
    }
  }
}

}  // namespace

void causalSoftmaxForward(const float* scores, float* probs, int64_t matrices, int64_t tokens,
                          float scale) {
  const int64_t rows = matrices * tokens;
  if (rows <= 0) return;
  causalSoftmaxForwardKernel<<<rowBlocksFor(rows), kThreads>>>(scores, probs, rows, tokens, scale);
  RM_CUDA_CHECK(cudaGetLastError());
}

void causalSoftmaxBackward(const float* probs, const float* dprobs, float* dscores,
                           int64_t matrices, int64_t tokens, float scale) {
  const int64_t rows = matrices * tokens;
  if (rows <= 0) return;
  causalSoftmaxBackwardKernel<<<rowBlocksFor(rows), kThreads>>>(probs, dprobs, dscores, rows,
                                                                tokens, scale);
  RM_CUDA_CHECK(cudaGetLastError());
}

// ------------------------------------------------------------------------------------------------
// Mixed precision: casts through cuda_bf16.h / cuda_fp16.h's round-to-nearest-even conversions,
// round-through, the non-finite count, and GEMM on the tensor cores through cublasGemmEx (16-bit
// operands, fp32 products summed in fp32: CUBLAS_COMPUTE_32F, an fp32 C)

namespace {

void checkFormat(DType format) {
  RM_CHECK_ARG(format == DType::kBF16 || format == DType::kF16,
               fmt::format("a 16-bit kernel takes BF16 or F16, got {}", dtypeName(format)));
}

cudaDataType_t cudaTypeOf(DType format) {
  return format == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
}

// Every value but NaN goes through the intrinsics. A NaN gets the host's bits (tensor/device.h: a
// quiet NaN keeping its payload's top bits, where the intrinsics give one canonical NaN), so that a
// cast gives the same bits on either device.
__device__ uint16_t toBf16Bits(float x) {
  if (isnan(x)) return static_cast<uint16_t>((__float_as_uint(x) >> 16) | 0x0040u);
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

__device__ uint16_t toHalfBits(float x) {
  if (isnan(x)) {
    const uint32_t bits = __float_as_uint(x);
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u | ((bits & 0x7FFFFFu) >> 13));
  }
  return __half_as_ushort(__float2half_rn(x));
}

// bf16 is a float's top half: widening is a shift (exact, NaN bits kept, as on the host).
__device__ float fromBf16Bits(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ float fromHalfBits(uint16_t h) {
  if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0) {  // NaN: quiet, payload kept (as the host)
    return __uint_as_float(((h & 0x8000u) << 16) | 0x7FC00000u | ((h & 0x3FFu) << 13));
  }
  return __half2float(__ushort_as_half(h));
}

__global__ void castFromFloatKernel(const float* src, uint16_t* dst, int64_t n, bool bf16) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    dst[i] = bf16 ? toBf16Bits(src[i]) : toHalfBits(src[i]);
  }
}

__global__ void castToFloatKernel(const uint16_t* src, float* dst, int64_t n, bool bf16) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    dst[i] = bf16 ? fromBf16Bits(src[i]) : fromHalfBits(src[i]);
  }
}

__global__ void roundThroughKernel(float* y, int64_t n, bool bf16) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    y[i] = bf16 ? fromBf16Bits(toBf16Bits(y[i])) : fromHalfBits(toHalfBits(y[i]));
  }
}

// Per-thread counts, summed over the block, one atomicAdd per block into the device counter.
__global__ void countNonFiniteKernel(const float* x, int64_t n, unsigned long long* count) {
  unsigned long long local = 0;
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    local += isfinite(x[i]) ? 0ull : 1ull;
  }
  local = blockReduce(local, 0ull, Add{});
  if (threadIdx.x == 0 && local != 0) atomicAdd(count, local);
}

}  // namespace

void castFromFloat(const float* src, uint16_t* dst, int64_t n, DType format) {
  checkFormat(format);
  if (n <= 0) return;
  castFromFloatKernel<<<blocksFor(n), kThreads>>>(src, dst, n, format == DType::kBF16);
  RM_CUDA_CHECK(cudaGetLastError());
}

void castToFloat(const uint16_t* src, float* dst, int64_t n, DType format) {
  checkFormat(format);
  if (n <= 0) return;
  castToFloatKernel<<<blocksFor(n), kThreads>>>(src, dst, n, format == DType::kBF16);
  RM_CUDA_CHECK(cudaGetLastError());
}

void roundThrough(float* y, int64_t n, DType format) {
  checkFormat(format);
  if (n <= 0) return;
  roundThroughKernel<<<blocksFor(n), kThreads>>>(y, n, format == DType::kBF16);
  RM_CUDA_CHECK(cudaGetLastError());
}

int64_t countNonFinite(const float* x, int64_t n) {
  if (n <= 0) return 0;
  Scratch count(sizeof(unsigned long long));
  RM_CUDA_CHECK(cudaMemset(count.as<unsigned long long>(), 0, sizeof(unsigned long long)));
  countNonFiniteKernel<<<blocksFor(n), kThreads>>>(x, n, count.as<unsigned long long>());
  RM_CUDA_CHECK(cudaGetLastError());
  return static_cast<int64_t>(toHost(count.as<unsigned long long>(), 1)[0]);
}

void gemmLowPrecision(DType format, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const uint16_t* a, const uint16_t* b, float beta, float* c) {
  checkFormat(format);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no products: C = beta * C, as gemm does
    scale(c, beta, m * n);
    return;
  }
  RM_CHECK_ARG(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX,
               fmt::format("gemm of {} x {} x {} exceeds cuBLAS's 32-bit sizes", m, n, k));
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  const cudaDataType_t type = cudaTypeOf(format);
  // gemm's row-major trick: C^T = op(B)^T op(A)^T in cuBLAS's column-major view.
  RM_CUBLAS_CHECK(cublas().gemmEx(
      cublasHandle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, type, ldb, a, type,
      lda, &beta, c, CUDA_R_32F, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemmBatchedLowPrecision(DType format, bool trans_a, bool trans_b, int64_t batch, int64_t m,
                             int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t stride_a,
                             const uint16_t* b, int64_t stride_b, float beta, float* c,
                             int64_t stride_c) {
  checkFormat(format);
  if (batch <= 0 || m == 0 || n == 0) return;
  if (k == 0) {  // no products: every C_i = beta * C_i
    for (int64_t i = 0; i < batch; ++i) scale(c + i * stride_c, beta, m * n);
    return;
  }
  RM_CHECK_ARG(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && batch <= INT_MAX,
               fmt::format("batched gemm of {} x {} x {} x {} exceeds cuBLAS's 32-bit sizes", batch,
                           m, n, k));
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  const cudaDataType_t type = cudaTypeOf(format);
  RM_CUBLAS_CHECK(cublas().gemmStridedBatchedEx(
      cublasHandle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, type, ldb, stride_b,
      a, type, lda, stride_a, &beta, c, CUDA_R_32F, static_cast<int>(n), stride_c,
      static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ringmaster::cuda
