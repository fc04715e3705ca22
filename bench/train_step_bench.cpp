// Benchmark of one training step (forward, softmax cross-entropy, backward, AdamW) of the
// 784-256-256-10 MLP on one CPU thread, beside PyTorch (Debian's python3-torch) doing the same step
// single-threaded, measured in the same run: both pinned to one CPU, in rounds that alternate the
// two sides, each side's best round kept. Prints a table of samples/s and the ratio to PyTorch.

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/random.h"
#include "nn/loss.h"
#include "nn/mlp.h"
#include "one_cpu.h"
#include "optim/optimizer.h"
#include "tensor/host_gemm.h"

namespace {

using namespace ringmaster;
using Clock = std::chrono::steady_clock;

struct Timing {
  int steps = 0;
  double seconds = 0;
  double samplesPerSecond(int batch) const { return steps > 0 ? steps * batch / seconds : 0.0; }
};

// The faster of two timings (an empty one, from a failed run, loses).
Timing faster(const Timing& a, const Timing& b) {
  if (a.steps == 0) return b;
  if (b.steps == 0) return a;
  return a.seconds / a.steps <= b.seconds / b.steps ? a : b;
}

Timing timeOurs(const std::vector<int64_t>& layers, int batch, double seconds) {
  auto model = buildMlp({.layers = layers, .seed = 0});
  model->setInputGradientNeeded(false);  // as PyTorch's inputs: no requires_grad
  Adam optimizer(model->namedParameters(),
                 {.lr = 1e-3f, .weight_decay = 0.01f, .decoupled_weight_decay = true});
  SoftmaxCrossEntropy loss;
  Rng rng(1);
  std::vector<float> x(batch * layers.front());
  for (float& v : x) v = static_cast<float>(rng.normal());
  std::vector<int32_t> y(batch);
  for (int32_t& v : y) v = static_cast<int32_t>(rng.below(layers.back()));
  Tensor inputs = Tensor::fromVector(x, {batch, layers.front()});
  Tensor labels = Tensor::fromInts(y, {batch});
  auto step = [&] {
    optimizer.zeroGrad();
    loss.forward(model->forward(inputs), labels);
    model->backward(loss.backward());
    optimizer.step();
  };
  for (int i = 0; i < 5; ++i) step();
  Timing t;
  const auto start = Clock::now();
  while ((t.seconds = std::chrono::duration<double>(Clock::now() - start).count()) < seconds) {
    step();
    t.steps++;
  }
  return t;
}

// Runs the PyTorch anchor; returns batch -> timing, empty when torch is not importable.
std::map<int, Timing> timeTorch(const std::string& python, const std::string& script,
                                const std::vector<int64_t>& layers, const std::vector<int>& batches,
                                double seconds) {
  const std::string command =
      fmt::format("OMP_NUM_THREADS=1 '{}' '{}' {} {} {} 2>/dev/null", python, script,
                  fmt::join(layers, ","), fmt::join(batches, ","), seconds);
  std::map<int, Timing> out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    out[j.at("batch").get<int>()] = Timing{j.at("steps").get<int>(), j.at("seconds").get<double>()};
  }
  pclose(pipe);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One MLP training step on one CPU thread, against PyTorch"};
  std::vector<int64_t> layers{784, 256, 256, 10};
  std::vector<int> batches{32, 64, 128, 256};
  double seconds = 2.0;
  int rounds = 3;
  std::string python = "/usr/bin/python3";
  std::string script = RINGMASTER_BENCH_DIR "/torch_train_step.py";
  app.add_option("--layers", layers, "MLP widths")->delimiter(',');
  app.add_option("--batch", batches, "batch sizes")->delimiter(',');
  app.add_option("--seconds", seconds, "time per measurement");
  app.add_option("--rounds", rounds, "rounds alternating the two sides; each side's best is shown")
      ->check(CLI::PositiveNumber);
  app.add_option("--python", python, "Python with torch, the anchor");
  CLI11_PARSE(app, argc, argv);

  cpu::setGemmThreads(1);
  const bench::PinnedToOneCpu pin(true);
  std::map<int, Timing> torch, ours;
  for (int round = 0; round < rounds; ++round) {
    for (const auto& [batch, timing] : timeTorch(python, script, layers, batches, seconds))
      torch[batch] = faster(torch[batch], timing);
    for (int batch : batches) ours[batch] = faster(ours[batch], timeOurs(layers, batch, seconds));
  }
  fmt::print(
      "MLP {} | AdamW | one CPU thread, both sides pinned to one CPU | best of {} rounds of {:.1f} "
      "s per cell\n",
      fmt::join(layers, "-"), rounds, seconds);
  if (torch.empty()) {
    fmt::print(
        "PyTorch anchor unavailable: install python3-torch (bash scripts/install-deps.sh "
        "python3-torch)\n");
  }
  fmt::print("{:>6} | {:>14} | {:>14} | {:>12} | {:>16}\n", "batch", "ours samples/s",
             "torch samples/s", "ours / torch", "ours ms/step");
  for (int batch : batches) {
    const Timing& mine = ours[batch];
    std::string torch_rate = "n/a", ratio = "n/a";
    if (auto it = torch.find(batch); it != torch.end() && it->second.steps > 0) {
      torch_rate = fmt::format("{:.0f}", it->second.samplesPerSecond(batch));
      ratio =
          fmt::format("{:.2f}", mine.samplesPerSecond(batch) / it->second.samplesPerSecond(batch));
    }
    fmt::print("{:>6} | {:>14.0f} | {:>14} | {:>12} | {:>16.3f}\n", batch,
               mine.samplesPerSecond(batch), torch_rate, ratio, 1e3 * mine.seconds / mine.steps);
  }
  return 0;
}
