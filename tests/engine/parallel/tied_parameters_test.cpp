// Tied parameters under the strategies that split a model, on a small model whose head reads the
// first Linear's weight (transposed, as the GPT's LM head reads the token embedding): FSDP puts
// the two blocks into one unit, the pipeline keeps a copy on the first and the last stage and sums
// their gradients; every mode, schedule and world size 1..4 ends where one process does, the copies
// equal, the clipped norm the whole model's, and a copy that starts apart takes its owner's value.
#include <gtest/gtest.h>

#include <tuple>

#include "common/parallel_cases.h"
#include "data/synthetic_dataset.h"
#include "engine/parallel/model_equivalence.h"
#include "optim/optimizer.h"
#include "parallel/tied_parameters.h"
#include "tensor/ops.h"

namespace ringmaster {
namespace {

using testing::FlatLoss;
using testing::maxLossDifference;
using testing::maxParameterDifference;
using testing::runRanks;
using testing::TrainedModel;
using testing::Training;

// y = x W + b with W the [hidden, classes] weight another module holds: the Linear(classes ->
// hidden) at the model's start, whose weight is [hidden, classes]. Lists only its bias.
class TransposedTiedHead : public Module {
 public:
  TransposedTiedHead(Parameter* tied, int64_t classes)
      : tied_(tied), bias_(makeParameter(Tensor::zeros({classes}))) {}
  std::string typeName() const override { return "TransposedTiedHead"; }
  Tensor forward(const Tensor& input) override {
    input_ = input;
    Tensor y = Tensor::empty({input.dim(0), tied_->value.dim(1)});
    ops::matmul(input, false, tied_->value, false, y);
    ops::addBiasRows(y, bias_.value);
    return y;
  }
  Tensor backward(const Tensor& grad_output) override {
    ops::matmul(input_, true, grad_output, false, tied_->grad, 1.0f, 1.0f);
    ops::sumRows(grad_output, bias_.grad, 1.0f);
    Tensor dx = Tensor::empty(input_.shape());
    ops::matmul(grad_output, false, tied_->value, true, dx);
    return dx;
  }
  std::vector<Tensor> saveContext() const override { return {input_}; }
  void restoreContext(const std::vector<Tensor>& context) override { input_ = context.at(0); }
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override {
    out.push_back({prefix + "bias", &bias_});
  }

 private:
  Parameter* tied_;
  Parameter bias_;
  Tensor input_;
};

constexpr int64_t kFeatures = 12, kHidden = 16, kSamples = 960;
constexpr int kHiddenBlocks = 6;  // blocks "in", "h.0".."h.5", "head": 8, for 4 ranks x 2 chunks

// Blocks: "in" (Linear 12 -> 16, ReLU), "h.i" (Linear 16 -> 16, ReLU), "head" (the tied head, 16
// -> 12 logits, of which the teacher's 4 classes are the targets).
std::unique_ptr<Sequential> buildTiedModel() {
  auto model = std::make_unique<Sequential>();
  auto first = std::make_unique<Linear>(kFeatures, kHidden, 3);
  Parameter* tied = &first->weight();
  std::vector<ModelBlock> blocks;
  auto add_block = [&](std::string name, std::vector<std::unique_ptr<Module>> modules,
                       int64_t parameters, int64_t in, int64_t out) {
    ModelBlock block{.name = std::move(name), .first_child = model->size()};
    for (auto& module : modules) model->append(std::move(module));
    block.end_child = model->size();
    block.parameters = parameters;
    block.input_shape = {in};
    block.output_shape = {out};
    blocks.push_back(block);
  };
  std::vector<std::unique_ptr<Module>> in;
  in.push_back(std::move(first));
  in.push_back(std::make_unique<ReLU>());
  add_block("in", std::move(in), kFeatures * kHidden + kHidden, kFeatures, kHidden);
  for (int i = 0; i < kHiddenBlocks; ++i) {
    std::vector<std::unique_ptr<Module>> hidden;
    hidden.push_back(std::make_unique<Linear>(kHidden, kHidden, 10 + i));
    hidden.push_back(std::make_unique<ReLU>());
    add_block("h." + std::to_string(i), std::move(hidden), kHidden * kHidden + kHidden, kHidden,
              kHidden);
  }
  std::vector<std::unique_ptr<Module>> head;
  head.push_back(std::make_unique<TransposedTiedHead>(tied, kFeatures));
  add_block("head", std::move(head), kFeatures, kHidden, kFeatures);
  blocks.back().tied_parameters = {"0.weight"};
  model->setBlocks(blocks);
  return model;
}

testing::SampleBatch teacherBatches() {
  auto data = std::make_shared<SyntheticTeacherDataset>(kSamples, kFeatures, 4, 3);
  return [data](const std::vector<int64_t>& indices) { return makeBatch(*data, indices); };
}

// Float sums in another order (per rank, per micro-batch, the two copies' halves of the tied
// gradient) differ by a few ulp; three SGD steps keep that near 1e-7 on parameters of ~0.2, far
// below a missing or doubled half of the tied gradient (~1e-2).
constexpr float kParameterTolerance = 2e-6f;
constexpr double kLossTolerance = 1e-6;

TEST(TiedParameters, TheModelDeclaresTheTieAndListsTheWeightOnce) {
  auto model = buildTiedModel();
  const ModelParameters names(*model);
  EXPECT_TRUE(names.hasTies());
  const ModelBlock& head = model->blocks().back();
  const std::vector<NamedParameter> tied = names.tiedInto(head.first_child, head.end_child);
  ASSERT_EQ(tied.size(), 1u);
  EXPECT_EQ(tied[0].name, "0.weight");
  EXPECT_EQ(names.ownerBlock(tied[0].parameter), 0u);
  EXPECT_TRUE(names.tiedInto(0, model->size()).empty()) << "inside the range, no tie crosses it";
  const int count =
      static_cast<int>(std::count_if(names.all().begin(), names.all().end(),
                                     [](const NamedParameter& p) { return p.name == "0.weight"; }));
  EXPECT_EQ(count, 1);

  std::vector<ModelBlock> blocks = model->blocks();
  blocks.back().tied_parameters = {"no.such.weight"};
  model->setBlocks(blocks);
  EXPECT_THROW(ModelParameters{*model}, Error);
}

using testing::FsdpCase;
class TiedFsdp : public ::testing::TestWithParam<FsdpCase> {};

TEST_P(TiedFsdp, EqualsOneProcess) {
  const auto [world, sharding, units] = GetParam();
  const Training training{.global_batch = 12, .steps = 3};
  const TrainedModel reference = testing::trainWhole(buildTiedModel, teacherBatches(), training);
  const TrainedModel fsdp = testing::trainFsdpModel(
      world, buildTiedModel, teacherBatches(), training, {.sharding = sharding, .units = units});
  EXPECT_LE(maxParameterDifference(fsdp, reference), kParameterTolerance);
  EXPECT_LE(maxLossDifference(fsdp, reference), kLossTolerance);
}

INSTANTIATE_TEST_SUITE_P(Modes, TiedFsdp, testing::everyFsdpCase(), testing::fsdpCaseName);

TEST(TiedFsdp, TheTiedBlocksShareTheRootUnit) {
  auto failures = runRanks(2, [&](Communicator& comm) {
    auto model = buildTiedModel();
    FullyShardedDataParallel fsdp(*model, comm, {.units = FsdpUnits::kLayer});
    ASSERT_EQ(fsdp.units().size(), 1u + kHiddenBlocks);
    EXPECT_EQ(fsdp.units()[0].blocks, (std::vector<size_t>{0, kHiddenBlocks + 1}));
    EXPECT_EQ(fsdp.units()[0].numel, kFeatures * kHidden + kHidden + kFeatures);
    std::vector<std::string> names;
    for (const auto& [name, value] : fsdp.fullParameters()) names.push_back(name);
    EXPECT_EQ(names.front(), "0.weight");
    EXPECT_EQ(std::count(names.begin(), names.end(), "0.weight"), 1);
    EXPECT_EQ(names.back(), std::to_string(model->size() - 1) + ".bias") << "the model's order";
  });
  EXPECT_ALL_RANKS_OK(failures);
}

using testing::PipelineCase;
class TiedPipeline : public ::testing::TestWithParam<PipelineCase> {};

TEST_P(TiedPipeline, EqualsOneProcess) {
  const auto [world, schedule] = GetParam();
  const int virtual_stages = schedule == PipelineSchedule::kInterleaved1f1b ? 2 : 1;
  const Training training{.global_batch = 24, .steps = 3};
  const TrainedModel reference = testing::trainWhole(buildTiedModel, teacherBatches(), training);
  const TrainedModel pipeline = testing::trainPipelineModel(
      world, buildTiedModel, teacherBatches(), training,
      {.schedule = schedule, .virtual_stages = virtual_stages, .micro_batches = 12});
  EXPECT_LE(maxParameterDifference(pipeline, reference), kParameterTolerance);
  EXPECT_LE(maxLossDifference(pipeline, reference), kLossTolerance);
}

INSTANTIATE_TEST_SUITE_P(Schedules, TiedPipeline, testing::everyPipelineCase(),
                         testing::pipelineCaseName);

TEST(TiedPipeline, WithoutTheSumTheCopiesDrift) {
  // The test above can fail: skipping the reduction leaves each copy with its half of the
  // gradient, which moves it well beyond the tolerance (by 3e-5 and more here).
  const Training training{.global_batch = 24, .steps = 1};
  const TrainedModel reference = testing::trainWhole(buildTiedModel, teacherBatches(), training);
  std::vector<std::vector<float>> first(2);
  auto failures = runRanks(2, [&](Communicator& comm) {
    auto model = buildTiedModel();
    PipelineParallel pipeline(*model, comm, {.micro_batches = 2});
    Sgd sgd = testing::makeSgd(pipeline.parameters());
    const testing::SampleBatch batches = teacherBatches();
    pipeline.runStep(
        12,
        [&](int micro) {
          std::vector<int64_t> rows;
          for (int64_t i = 0; i < 12; ++i) rows.push_back(micro * 12 + i);
          return batches(rows);
        },
        0.5f);
    sgd.step();
    for (const NamedParameter& p : pipeline.parameters())
      if (p.name == "0.weight") first[comm.rank()] = p.parameter->value.toFloatVector();
  });
  EXPECT_ALL_RANKS_OK(failures);
  TrainedModel copy0, copy1;
  copy0.values["0.weight"] = first[0];
  copy1.values["0.weight"] = first[1];
  TrainedModel tied;
  tied.values["0.weight"] = reference.values.at("0.weight");
  EXPECT_GT(maxParameterDifference(copy0, tied), 10 * kParameterTolerance);
  EXPECT_GT(maxParameterDifference(copy1, tied), 10 * kParameterTolerance);
}

TEST(TiedPipeline, CopiesStartFromTheOwnersValueAndClipByTheWholeNorm) {
  const int world = 3;
  // The whole model's gradient norm over one batch, the tied weight counted once.
  auto whole = buildTiedModel();
  const testing::SampleBatch batches = teacherBatches();
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < 6; ++i) indices.push_back(i);
  FlatLoss loss;
  Batch batch = batches(indices);
  loss.forward(whole->forward(batch.inputs), batch.targets);
  whole->backward(loss.backward(1.0f));
  const double expected = gradNorm(whole->namedParameters());
  std::vector<double> norms(world);
  auto failures = runRanks(world, [&](Communicator& comm) {
    auto model = buildTiedModel();
    const std::vector<NamedParameter> all = model->namedParameters();
    // The last rank's copy starts elsewhere: the pipeline must give it the owner's value.
    if (comm.rank() == world - 1) ops::scale(all.front().parameter->value, 3.0f);
    PipelineParallel pipeline(*model, comm, {.micro_batches = 1});
    pipeline.runStep(
        6, [&](int) { return batches(indices); }, 1.0f);
    pipeline.reduceTiedGradients();
    norms[comm.rank()] = pipeline.clipGradNorm(1e-3);
  });
  EXPECT_ALL_RANKS_OK(failures);
  for (int rank = 0; rank < world; ++rank)
    EXPECT_NEAR(norms[rank], expected, 1e-5 * expected) << "rank " << rank;
}

}  // namespace
}  // namespace ringmaster
