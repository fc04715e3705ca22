// Benchmark of the two fp32 GEMMs the engine chooses between (host_gemm.h): OpenBLAS's cblas_sgemm
// and oneDNN's dnnl_sgemm, on the shapes of a small GPT step in the three transpose modes a
// Linear's forward and backward use, measured in the same run. Prints GFLOP/s per cell, the
// library the engine picks for it, and the picked one's speed over each.
#include <cblas.h>
#include <dnnl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/random.h"
#include "tensor/host_gemm.h"

namespace {

using namespace ringmaster;
using Clock = std::chrono::steady_clock;

// One GEMM C[m, n] = op(A) op(B) with op(A) [m, k] and op(B) [k, n], row-major as the engine's.
struct Cell {
  std::string shape;  // the layer it comes from
  std::string mode;   // NN forward, NT input gradient, TN weight gradient
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
};

// A layer y[rows, out] = x[rows, in] w[in, out] gives three GEMMs: the forward (NN), the input
// gradient dx = dy w^T (NT) and the weight gradient dw = x^T dy (TN).
void addLayer(std::vector<Cell>& cells, const std::string& name, int64_t rows, int64_t in,
              int64_t out) {
  cells.push_back({name, "NN y=xW", false, false, rows, out, in});
  cells.push_back({name, "NT dx=dyW'", false, true, rows, in, out});
  cells.push_back({name, "TN dW=x'dy", true, false, in, out, rows});
}

void multiply(cpu::GemmLibrary library, const Cell& c, const float* a, const float* b, float* out) {
  cpu::sgemmWith(library, c.trans_a, c.trans_b, c.m, c.n, c.k, 1.0f, a, c.trans_a ? c.m : c.k, b,
                 c.trans_b ? c.k : c.n, 0.0f, out, c.n);
}

// Best (shortest) time of one call over `seconds` of calls (at least two), after one warm-up.
template <typename Fn>
double bestSeconds(Fn&& call, double seconds) {
  call();
  double best = 1e30;
  const auto start = Clock::now();
  for (int calls = 0;; ++calls) {
    const auto t0 = Clock::now();
    call();
    const auto t1 = Clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    if (calls >= 1 && std::chrono::duration<double>(t1 - start).count() >= seconds) break;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "fp32 GEMM: OpenBLAS beside oneDNN on a small GPT step's shapes, and the engine's pick"};
  int threads = 1;
  int64_t rows = 1024, dim = 256;
  std::vector<int64_t> vocabs{256, 50257};
  double seconds = 0.5;
  int repeats = 3;
  app.add_option("--threads", threads, "threads for both libraries")->check(CLI::PositiveNumber);
  app.add_option("--rows", rows, "batch x context (B*T)")->check(CLI::PositiveNumber);
  app.add_option("--dim", dim, "model width C")->check(CLI::PositiveNumber);
  app.add_option("--vocab", vocabs, "LM head widths V")->delimiter(',');
  app.add_option("--seconds", seconds, "time per measurement");
  app.add_option("--repeats", repeats, "alternating rounds; the best of them is shown")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  cpu::setGemmThreads(threads);

  std::vector<Cell> cells;
  addLayer(cells, "64x1024x1024", 64, 1024, 1024);  // the shape of the figure in issue 18
  addLayer(cells, fmt::format("qkv {}x{}x{}", rows, dim, 3 * dim), rows, dim, 3 * dim);
  addLayer(cells, fmt::format("fc {}x{}x{}", rows, dim, 4 * dim), rows, dim, 4 * dim);
  addLayer(cells, fmt::format("proj {}x{}x{}", rows, 4 * dim, dim), rows, 4 * dim, dim);
  for (int64_t v : vocabs) {
    // The head is tied to wte [V, C]: logits = x wte^T (NT), dx = dlogits wte (NN), dwte =
    // dlogits^T x (TN).
    cells.push_back({fmt::format("head V={}", v), "NT y=xE'", false, true, rows, v, dim});
    cells.push_back({fmt::format("head V={}", v), "NN dx=dyE", false, false, rows, dim, v});
    cells.push_back({fmt::format("head V={}", v), "TN dE=dy'x", true, false, v, dim, rows});
  }

  std::string openblas = OPENBLAS_VERSION;  // " OpenBLAS 0.3.21 "
  openblas.erase(0, openblas.find_first_not_of(' '));
  openblas.erase(openblas.find_last_not_of(' ') + 1);
  fmt::print("fp32 GEMM | {} thread(s) | {} | oneDNN {}.{}.{} | best of {} x {:.2f} s\n", threads,
             openblas, dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch, repeats,
             seconds);
  fmt::print(
      "{:<20} | {:<11} | {:>6} {:>6} {:>6} | {:>15} | {:>14} | {:>12} | {:>15} | {:>14} | {:>9}\n",
      "layer", "mode", "M", "N", "K", "OpenBLAS GFLOP/s", "oneDNN GFLOP/s", "engine picks",
      "engine/OpenBLAS", "engine/oneDNN", "max |diff|");
  Rng rng(7);
  for (const Cell& c : cells) {
    std::vector<float> a(c.m * c.k), b(c.k * c.n), c_blas(c.m * c.n), c_dnnl(c.m * c.n);
    for (float& v : a) v = static_cast<float>(rng.normal());
    for (float& v : b) v = static_cast<float>(rng.normal());
    double best_blas = 1e30, best_dnnl = 1e30;
    for (int r = 0; r < repeats; ++r) {
      best_blas = std::min(
          best_blas,
          bestSeconds(
              [&] { multiply(cpu::GemmLibrary::kOpenBlas, c, a.data(), b.data(), c_blas.data()); },
              seconds));
      best_dnnl = std::min(
          best_dnnl,
          bestSeconds(
              [&] { multiply(cpu::GemmLibrary::kOneDnn, c, a.data(), b.data(), c_dnnl.data()); },
              seconds));
    }
    float diff = 0;
    for (size_t i = 0; i < c_blas.size(); ++i)
      diff = std::max(diff, std::abs(c_blas[i] - c_dnnl[i]));
    const bool picks_dnnl = cpu::gemmLibraryFor(c.trans_a, threads) == cpu::GemmLibrary::kOneDnn;
    const double engine = picks_dnnl ? best_dnnl : best_blas;
    const double flops = 2.0 * c.m * c.n * c.k;
    fmt::print(
        "{:<20} | {:<11} | {:>6} {:>6} {:>6} | {:>16.1f} | {:>14.1f} | {:>12} | {:>15.2f} | "
        "{:>14.2f} | {:>9.2e}\n",
        c.shape, c.mode, c.m, c.n, c.k, flops / best_blas / 1e9, flops / best_dnnl / 1e9,
        picks_dnnl ? "oneDNN" : "OpenBLAS", best_blas / engine, best_dnnl / engine, diff);
  }
  return 0;
}
