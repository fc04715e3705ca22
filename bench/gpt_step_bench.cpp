// Benchmark of one GPT training step (forward, cross-entropy over every target token, backward,
// AdamW) on the CPU with 1 and 2 threads, in fp32 and in bf16 (train.precision's autocast: ours
// through setAutocast, PyTorch's under torch.autocast("cpu", dtype=torch.bfloat16)), beside
// PyTorch (Debian's python3-torch) running the same model from the same weights (written here as
// safetensors, loaded by torch_gpt_step.py) on the same tokens, measured in the same run. Prints
// tokens/s, the ratio, each side's time per phase and both sides' first and last losses (equal
// in fp32: both ran the same model and optimizer; in bf16 close, the two round in different
// places).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "core/random.h"
#include "nn/gpt.h"
#include "nn/loss.h"
#include "one_cpu.h"
#include "optim/optimizer.h"
#include "tensor/host_gemm.h"

namespace {

using namespace ringmaster;
using Clock = std::chrono::steady_clock;

// Seconds per step of each phase, the best over the repeats (each repeat: the mean over its steps).
struct Timing {
  double step = 0, forward = 0, loss = 0, backward = 0, optimizer = 0;
  double first_loss = 0;  // the loss of the very first step, before any update
  double last_loss = 0;   // the loss of the last step (after 2 + repeats x steps updates)
};

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr AdamOptions kAdamW{.lr = 3e-4f,
                             .beta1 = 0.9f,
                             .beta2 = 0.95f,
                             .eps = 1e-8f,
                             .weight_decay = 0.1f,
                             .decoupled_weight_decay = true};

Timing timeOurs(const GptConfig& config, DType precision, const Tensor& inputs,
                const Tensor& targets, int steps, int repeats) {
  auto model = buildGpt(config);
  setAutocast(*model, precision);
  Adam optimizer(model->namedParameters(), kAdamW);
  SoftmaxCrossEntropy loss;
  const int64_t rows = inputs.shape()[0] * inputs.shape()[1];
  const Tensor labels = targets.view({rows});
  Timing phases;  // accumulated over the current repeat
  double first_loss = 0, last_loss = 0;
  auto step = [&] {
    auto t = Clock::now();
    optimizer.zeroGrad();
    Tensor logits = model->forward(inputs);
    phases.forward += since(t);
    t = Clock::now();
    const double value = loss.forward(logits.view({rows, config.vocab_size}), labels);
    Tensor grad = loss.backward().view(logits.shape());
    phases.loss += since(t);
    t = Clock::now();
    model->backward(grad);
    phases.backward += since(t);
    t = Clock::now();
    optimizer.step();
    phases.optimizer += since(t);
    return value;
  };
  first_loss = step();
  step();  // warm-up: the allocator's caches and the optimizer's state
  Timing best{.step = 1e30};
  for (int r = 0; r < repeats; ++r) {
    phases = {};
    const auto start = Clock::now();
    for (int s = 0; s < steps; ++s) last_loss = step();
    const double per_step = since(start) / steps;
    if (per_step < best.step) {
      best = {per_step, phases.forward / steps, phases.loss / steps, phases.backward / steps,
              phases.optimizer / steps};
    }
  }
  best.first_loss = first_loss;
  best.last_loss = last_loss;
  return best;
}

// Runs the PyTorch anchor; step 0 when it fails or torch is not importable.
Timing timeTorch(const std::string& python, const std::string& script, const std::string& weights,
                 const std::string& tokens, const GptConfig& c, const std::string& precision,
                 int threads, int steps, int repeats) {
  const std::string command = fmt::format(
      "OMP_NUM_THREADS={} '{}' '{}' --weights '{}' --tokens '{}' --layers {} --heads {} "
      "--precision {} --threads {} --steps {} --repeats {} --lr {} --beta1 {} --beta2 {} --eps {} "
      "--weight-decay {}",
      threads, python, script, weights, tokens, c.layers, c.heads, precision, threads, steps,
      repeats, kAdamW.lr, kAdamW.beta1, kAdamW.beta2, kAdamW.eps, kAdamW.weight_decay);
  Timing out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step")) continue;
    out = {j.at("step").get<double>(),      j.at("forward").get<double>(),
           j.at("loss").get<double>(),      j.at("backward").get<double>(),
           j.at("optimizer").get<double>(), j.at("first_loss").get<double>(),
           j.at("last_loss").get<double>()};
  }
  if (pclose(pipe) != 0) out = {};
  return out;
}

std::string phasesMs(const Timing& t) {
  return fmt::format("{:.1f}/{:.1f}/{:.1f}/{:.1f}", 1e3 * t.forward, 1e3 * t.loss, 1e3 * t.backward,
                     1e3 * t.optimizer);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One GPT training step on the CPU, against PyTorch from the same weights"};
  GptConfig config{.vocab_size = 256, .context = 128, .layers = 4, .heads = 4, .dim = 256};
  int64_t batch = 8;
  std::vector<int> thread_counts{1, 2};
  std::vector<std::string> precisions{"fp32", "bf16"};
  int steps = 5, repeats = 3, rounds = 3;
  std::string python = "/usr/bin/python3";
  std::string script = RINGMASTER_BENCH_DIR "/torch_gpt_step.py";
  app.add_option("--vocab", config.vocab_size, "vocabulary size")->check(CLI::PositiveNumber);
  app.add_option("--context", config.context, "tokens per sample")->check(CLI::PositiveNumber);
  app.add_option("--layers", config.layers, "transformer blocks")->check(CLI::PositiveNumber);
  app.add_option("--heads", config.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--dim", config.dim, "model width (a multiple of heads)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "samples per step")->check(CLI::PositiveNumber);
  app.add_option("--threads", thread_counts, "thread counts to sweep")->delimiter(',');
  app.add_option("--precision", precisions, "train.precision values to sweep (fp32, bf16)")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--steps", steps, "steps per repeat")->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats, "repeats; the fastest is shown")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "rounds alternating the two sides; each side's best is shown")
      ->check(CLI::PositiveNumber);
  app.add_option("--python", python, "Python with torch, the anchor");
  CLI11_PARSE(app, argc, argv);

  // The weights (the seed's initialisation, as the engine builds it) and the tokens, for the
  // anchor.
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("ringmaster-gpt-step-bench-{}", static_cast<long>(getpid()));
  std::filesystem::create_directories(dir);
  const std::string weights = (dir / "weights.safetensors").string();
  const std::string tokens = (dir / "tokens.safetensors").string();
  {
    auto model = buildGpt(config);
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const NamedParameter& p : model->namedParameters())
      tensors.emplace_back(p.name, p.parameter->value);
    saveSafetensors(weights, tensors);
  }
  Rng rng(3);
  std::vector<int32_t> stream(batch * config.context + 1);
  for (int32_t& t : stream) t = static_cast<int32_t>(rng.below(config.vocab_size));
  std::vector<int32_t> x, y;  // sample b is the window starting at b * context; y is x shifted
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t < config.context; ++t) {
      x.push_back(stream[b * config.context + t]);
      y.push_back(stream[b * config.context + t + 1]);
    }
  }
  const Tensor inputs = Tensor::fromInts(x, {batch, config.context});
  const Tensor targets = Tensor::fromInts(y, {batch, config.context});
  saveSafetensors(tokens, {{"inputs", inputs}, {"targets", targets}});

  const ModelDescription description = describeGpt(config);
  const int64_t tokens_per_step = batch * config.context;
  fmt::print(
      "GPT vocab {} context {} layers {} heads {} dim {} ({:.2f}M parameters) | batch {} ({} "
      "tokens/step) | AdamW | best of {} rounds x {} x {} steps, one-thread runs pinned to one "
      "CPU\n",
      config.vocab_size, config.context, config.layers, config.heads, config.dim,
      static_cast<double>(description.parameterCount()) / 1e6, batch, tokens_per_step, rounds,
      repeats, steps);
  fmt::print("{:>9} | {:>7} | {:>11} | {:>12} | {:>12} | {:>24} | {:>25} | {}\n", "precision",
             "threads", "ours tok/s", "torch tok/s", "ours / torch", "ours fwd/loss/bwd/opt ms",
             "torch fwd/loss/bwd/opt ms", "loss first / last: ours | torch");
  bool anchor_missing = false;
  for (const std::string& precision : precisions)
    for (int threads : thread_counts) {
      cpu::setGemmThreads(threads);
      const DType dtype = precision == "bf16" ? DType::kBF16 : DType::kF32;
      // Rounds alternate the two sides, so that a slow spell of the machine hits both; each side's
      // best round is kept.
      Timing torch, ours{.step = 1e30};
      const bench::PinnedToOneCpu pin(threads == 1);
      for (int round = 0; round < rounds; ++round) {
        const Timing torch_round =
            timeTorch(python, script, weights, tokens, config, precision, threads, steps, repeats);
        if (torch_round.step > 0 && (torch.step <= 0 || torch_round.step < torch.step))
          torch = torch_round;
        const Timing ours_round = timeOurs(config, dtype, inputs, targets, steps, repeats);
        if (ours_round.step < ours.step) ours = ours_round;
      }
      const double ours_rate = tokens_per_step / ours.step;
      std::string torch_rate = "n/a", ratio = "n/a", torch_phases = "n/a", torch_loss = "n/a";
      if (torch.step <= 0) anchor_missing = true;
      if (torch.step > 0) {
        torch_rate = fmt::format("{:.0f}", tokens_per_step / torch.step);
        ratio = fmt::format("{:.2f}", ours_rate / (tokens_per_step / torch.step));
        torch_phases = phasesMs(torch);
        torch_loss = fmt::format("{:.5f} / {:.5f}", torch.first_loss, torch.last_loss);
      }
      fmt::print(
          "{:>9} | {:>7} | {:>11.0f} | {:>12} | {:>12} | {:>24} | {:>25} | {:.5f} / {:.5f} | {}\n",
          precision, threads, ours_rate, torch_rate, ratio, phasesMs(ours), torch_phases,
          ours.first_loss, ours.last_loss, torch_loss);
    }
  if (anchor_missing) {
    fmt::print(
        "PyTorch anchor unavailable: install python3-torch (bash scripts/install-deps.sh "
        "python3-torch) or see {}'s error by running it alone\n",
        script);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
