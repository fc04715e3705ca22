// The tensor-parallel GPT's build from the plain GPT, the map between full parameters and the
// ranks' slices, and the sequence-parallel gradient sum.
#include "parallel/tensor_parallel/tp_gpt.h"

#include "parallel/tensor_parallel/mappings.h"

#include <fmt/format.h>

#include <map>

#include "core/error.h"
#include "core/random.h"
#include "nn/transformer_block.h"
#include "parallel/tensor_parallel/layers.h"
#include "parallel/tensor_parallel/vocab_parallel_cross_entropy.h"

namespace ringmaster {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---------------------------------------------------------------------------------------------
// How a parameter is split: whole on every rank, by rows of its [rows, columns] matrix (a vector
// is one row), or by columns in `groups` equal groups each split (c_attn's q, k and v).

struct Split {
  enum Kind { kWhole, kRows, kColumns } kind = kWhole;
  int64_t groups = 1;
};

Split splitOf(const std::string& name) {
  if (isTensorParallelReplicated(name)) return {};
  if (name == "wte.weight" || endsWith(name, "attn.c_proj.weight") ||
      endsWith(name, "mlp.c_proj.weight"))
    return {Split::kRows};
  if (endsWith(name, "attn.c_attn.weight") || endsWith(name, "attn.c_attn.bias"))
    return {Split::kColumns, 3};
  if (endsWith(name, "mlp.c_fc.weight") || endsWith(name, "mlp.c_fc.bias"))
    return {Split::kColumns, 1};
  RM_THROW(kInvalidArgument, fmt::format("{} is not a parameter of the GPT", name));
}

struct Matrix {
  int64_t rows, columns;
};

Matrix matrixOf(const Shape& shape) {
  return shape.size() == 2 ? Matrix{shape[0], shape[1]} : Matrix{1, shape.back()};
}

// Calls copy(local index, full index) for each element of rank `rank`'s slice of a parameter of
// `full_shape`.
template <typename Copy>
void forEachSliceElement(const Split& split, const Shape& full_shape, int64_t rank, int64_t size,
                         Copy copy) {
  const auto [R, C] = matrixOf(full_shape);
  if (split.kind == Split::kRows) {
    const int64_t local_rows = R / size;
    for (int64_t i = 0; i < local_rows * C; ++i) copy(i, rank * local_rows * C + i);
    return;
  }
  const int64_t group_width = C / split.groups, width = group_width / size;
  for (int64_t i = 0; i < R; ++i)
    for (int64_t g = 0; g < split.groups; ++g)
      for (int64_t j = 0; j < width; ++j)
        copy((i * split.groups + g) * width + j, i * C + g * group_width + rank * width + j);
}

Shape sliceShape(const Split& split, Shape shape, int64_t size) {
  if (split.kind == Split::kRows) shape.front() /= size;
  if (split.kind == Split::kColumns) shape.back() /= size;
  return shape;
}

void checkSplittable(const std::string& name, const Split& split, const Shape& shape,
                     int64_t size) {
  const auto [R, C] = matrixOf(shape);
  const bool even = split.kind == Split::kRows ? R % size == 0 : C % (split.groups * size) == 0;
  RM_CHECK_ARG(shape.size() <= 2 && even,
               fmt::format("{} {} does not split over {} ranks", name, shapeStr(shape), size));
}

void checkConfig(const GptConfig& config, int tp_size) {
  const std::vector<ModelProblem> problems =
      validateTensorParallelGpt(config, tp_size, TensorParallelSpec{});
  RM_CHECK_ARG(problems.empty(), problems.empty() ? std::string()
                                                  : fmt::format("{}: {}", problems.front().path,
                                                                problems.front().message));
}

// ---------------------------------------------------------------------------------------------
// The build.

// The seeds of the plain model's Dropouts in forward order: the embedding's, then per block the
// attention's, the attention's residual and the MLP's.
std::vector<uint64_t> dropoutSeeds(Sequential& model) {
  std::vector<uint64_t> seeds;
  forEachModule(model, [&](Module& m) {
    if (auto* dropout = dynamic_cast<Dropout*>(&m)) seeds.push_back(dropout->seed());
  });
  return seeds;
}

// The plain GPT's blocks with the rank's parameter counts and, under sequence parallelism, the
// activations between blocks as sequence shards.
std::vector<ModelBlock> tensorParallelBlocks(const GptConfig& c, int64_t tp_size,
                                             bool sequence_parallel, Sequential& model) {
  std::vector<ModelBlock> blocks = describeGpt(c).blocks;
  const Shape shard = {c.context / tp_size, c.dim};
  for (ModelBlock& block : blocks) {
    block.parameters = 0;
    for (size_t m = block.first_child; m < block.end_child; ++m)
      block.parameters += model.child(m).parameterCount();
    if (sequence_parallel) {
      if (block.name != "embedding") block.input_shape = shard;
      if (block.name != "head") block.output_shape = shard;
    }
  }
  blocks.back().output_shape = {c.context, c.vocab_size / tp_size};
  return blocks;
}

}  // namespace

std::vector<ModelProblem> validateTensorParallelGpt(const GptConfig& c, int tp_size,
                                                    const TensorParallelSpec& spec) {
  std::vector<ModelProblem> problems = validateGpt(c);
  if (!problems.empty()) return problems;
  auto divides = [&](int64_t value, const char* field, const char* path) {
    if (value % tp_size != 0)
      problems.push_back({path, fmt::format("{} tensor-parallel ranks must divide model.{} ({})",
                                            tp_size, field, value)});
  };
  if (tp_size < 1) return {{"strategy.mesh.tp", "expected a positive integer"}};
  divides(c.heads, "heads", "strategy.mesh.tp");
  divides(c.vocab_size, "vocab_size", "strategy.mesh.tp");
  if (spec.sequence_parallel) divides(c.context, "context", "strategy.tp.sequence_parallel");
  return problems;
}

std::unique_ptr<Sequential> buildTensorParallelGpt(const GptConfig& c, Communicator& tp,
                                                   const TensorParallelSpec& spec, Device device) {
  const std::vector<ModelProblem> problems = validateTensorParallelGpt(c, tp.size(), spec);
  RM_CHECK_ARG(problems.empty(), problems.empty() ? std::string()
                                                  : fmt::format("{}: {}", problems.front().path,
                                                                problems.front().message));
  const int64_t rank = tp.rank(), P = tp.size();
  const bool sp = spec.sequence_parallel;
  const TensorParallelGroup group{&tp, sp};
  // Megatron initialises the full master weights and splits them: the plain GPT, on the host.
  std::unique_ptr<Sequential> full = buildGpt(c, Device::cpu());
  const std::vector<uint64_t> seeds = dropoutSeeds(*full);
  RM_ENFORCE(seeds.size() == static_cast<size_t>(1 + 3 * c.layers),
             "the plain GPT's dropouts are not one for the embedding and three per block");
  auto perRank = [&](uint64_t seed) {
    return P == 1 ? seed : mix64(seed ^ mix64(0x5450ull + static_cast<uint64_t>(rank)));
  };
  auto residual = [&](uint64_t seed) { return sp ? perRank(seed) : seed; };

  auto model = std::make_unique<Sequential>();
  auto embedding = std::make_unique<VocabParallelEmbedding>(
      VocabParallelEmbedding::Options{.local_vocab = c.vocab_size / P,
                                      .vocab_start = rank * c.vocab_size / P,
                                      .context = c.context,
                                      .dim = c.dim,
                                      .dropout = c.dropout,
                                      .dropout_seed = residual(seeds[0])},
      group, device);
  Parameter* wte = &embedding->tokenEmbedding();
  model->append(std::move(embedding), "");
  for (int64_t i = 0; i < c.layers; ++i) {
    const uint64_t* block_seeds = &seeds[static_cast<size_t>(1 + 3 * i)];
    auto attention = std::make_unique<TensorParallelAttention>(
        TensorParallelAttention::Options{.dim = c.dim,
                                         .local_heads = c.heads / P,
                                         .head_dim = c.headDim(),
                                         .dropout = c.dropout,
                                         .bias = c.bias,
                                         .attention_dropout_seed = perRank(block_seeds[0]),
                                         .residual_dropout_seed = residual(block_seeds[1])},
        group, device);
    auto mlp = std::make_unique<TensorParallelMlp>(
        TensorParallelMlp::Options{.dim = c.dim,
                                   .local_hidden = 4 * c.dim / P,
                                   .dropout = c.dropout,
                                   .bias = c.bias,
                                   .dropout_seed = residual(block_seeds[2])},
        group, device);
    model->append(std::make_unique<TransformerBlock>(c.dim, c.bias, std::move(attention),
                                                     std::move(mlp), device),
                  fmt::format("h.{}", i));
  }
  model->append(std::make_unique<VocabParallelLmHead>(c.dim, c.bias, wte, group, device), "");

  std::map<std::string, Tensor> full_values;
  for (const NamedParameter& p : full->namedParameters()) full_values[p.name] = p.parameter->value;
  for (const NamedParameter& p : model->namedParameters())
    p.parameter->value.copyFrom(shardOfParameter(p.name, full_values.at(p.name),
                                                 static_cast<int>(rank), static_cast<int>(P), c));
  model->setBlocks(tensorParallelBlocks(c, P, sp, *model));
  return model;
}

std::unique_ptr<LossFunction> makeTensorParallelGptLoss(const GptConfig& config, Communicator& tp) {
  checkConfig(config, tp.size());
  return std::make_unique<VocabParallelCrossEntropy>(tp, tp.rank() * config.vocab_size / tp.size());
}

Tensor shardOfParameter(const std::string& name, const Tensor& full, int tp_rank, int tp_size,
                        const GptConfig& config) {
  checkConfig(config, tp_size);
  RM_CHECK_ARG(tp_rank >= 0 && tp_rank < tp_size,
               fmt::format("tensor-parallel rank {} of {}", tp_rank, tp_size));
  const Split split = splitOf(name);
  if (split.kind == Split::kWhole) return full.clone();
  checkSplittable(name, split, full.shape(), tp_size);
  const std::vector<float> values = full.toFloatVector();
  std::vector<float> slice(static_cast<size_t>(full.numel() / tp_size));
  forEachSliceElement(split, full.shape(), tp_rank, tp_size,
                      [&](int64_t local, int64_t whole) { slice[local] = values[whole]; });
  return Tensor::fromVector(slice, sliceShape(split, full.shape(), tp_size), full.device());
}

Tensor gatherFullParameter(const std::string& name, const Tensor& local, Communicator& tp,
                           const GptConfig& config) {
  checkConfig(config, tp.size());
  const Split split = splitOf(name);
  if (split.kind == Split::kWhole) return local.clone();
  const int64_t P = tp.size(), n = local.numel();
  Shape full_shape = local.shape();
  if (split.kind == Split::kRows) full_shape.front() *= P;
  if (split.kind == Split::kColumns) full_shape.back() *= P;
  Tensor blocks = Tensor::empty({P, n}, DType::kF32, tp.device());
  tp.allGather(blocks, local.to(tp.device()))->wait();
  const std::vector<float> gathered = blocks.toFloatVector();
  std::vector<float> whole(static_cast<size_t>(n * P));
  for (int64_t p = 0; p < P; ++p)
    forEachSliceElement(split, full_shape, p, P,
                        [&](int64_t l, int64_t w) { whole[w] = gathered[p * n + l]; });
  return Tensor::fromVector(whole, full_shape, local.device());
}

bool isTensorParallelReplicated(const std::string& name) {
  return name == "wpe.weight" || name.rfind("ln_f.", 0) == 0 ||
         name.find(".ln_1.") != std::string::npos || name.find(".ln_2.") != std::string::npos ||
         endsWith(name, "attn.c_proj.bias") || endsWith(name, "mlp.c_proj.bias");
}

// One all-reduce over the replicated gradients packed into one buffer (they are small: LayerNorms,
// biases, wpe).
void reduceSequenceParallelGradients(const std::vector<NamedParameter>& parameters,
                                     Communicator& tp, const TensorParallelSpec& spec) {
  if (!spec.sequence_parallel || tp.size() == 1) return;
  std::vector<Tensor> grads;
  for (const NamedParameter& p : parameters)
    if (isTensorParallelReplicated(p.name)) grads.push_back(p.parameter->grad);
  allReduceSumPacked(grads, tp);
}

}  // namespace ringmaster
