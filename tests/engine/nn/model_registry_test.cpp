// The model registration table (engine/nn/models.cpp) and what the MLP declares through it: the
// description matches the built model (names, shapes, blocks), unknown kinds are refused naming
// the registered ones, and a Sequential's blocks must cover its children in order.
#include <gtest/gtest.h>

#include "core/error.h"
#include "nn/layers.h"
#include "nn/mlp.h"
#include "nn/model.h"

namespace ringmaster {
namespace {

TEST(ModelRegistry, MlpDescriptionMatchesTheBuiltModel) {
  const ModelSpec spec{.kind = "mlp", .layers = {6, 5, 4, 3}, .dropout = 0.2, .layer_norm = true};
  const ModelDescription d = describeModel(spec);
  auto model = buildModel(spec);
  std::vector<NamedParameter> built = model->namedParameters();
  ASSERT_EQ(d.parameters.size(), built.size());
  for (size_t i = 0; i < built.size(); ++i) {
    EXPECT_EQ(d.parameters[i].name, built[i].name);
    EXPECT_EQ(d.parameters[i].shape, built[i].parameter->value.shape());
  }
  EXPECT_EQ(d.parameterCount(), model->parameterCount());
  // Linear LN ReLU Dropout | Linear LN ReLU Dropout | Linear: one block per Linear layer.
  ASSERT_EQ(d.blocks.size(), 3u);
  EXPECT_EQ(d.blocks[0].first_child, 0u);
  EXPECT_EQ(d.blocks[0].end_child, 4u);
  EXPECT_EQ(d.blocks[2].first_child, 8u);
  EXPECT_EQ(d.blocks[2].end_child, 9u);
  EXPECT_EQ(d.blocks[1].parameters, 5 * 4 + 4 + 2 * 4);
  EXPECT_EQ(d.blocks[1].input_shape, (Shape{5}));
  EXPECT_EQ(d.blocks[1].output_shape, (Shape{4}));
  EXPECT_EQ(model->blocks(), d.blocks);
  EXPECT_EQ(d.flops_per_sample, 2 * (6 * 5 + 5 * 4 + 4 * 3));
  // Kept floats: Linear inputs 6+5+4; per hidden layer LN (w + 2), activation w, mask w.
  EXPECT_EQ(d.activation_bytes_per_sample, 4 * (6 + 5 + 4 + (5 + 2 + 5 + 5) + (4 + 2 + 4 + 4)));
  // buildMlp (the tests' builder) declares the same blocks.
  EXPECT_EQ(buildMlp(mlpConfig(spec))->blocks(), d.blocks);
}

TEST(ModelRegistry, AnUnknownKindIsRefusedNamingTheRegisteredOnes) {
  EXPECT_EQ(findModel("cnn"), nullptr);
  try {
    describeModel(ModelSpec{.kind = "cnn", .layers = {4, 2}});
    FAIL() << "an unknown kind was described";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("\"mlp\", \"residual_mlp\""), std::string::npos) << e.message();
  }
}

TEST(ModelRegistry, BlocksMustCoverTheChildrenInOrder) {
  auto model = buildMlp({.layers = {4, 3, 2}});  // Linear ReLU Linear
  std::vector<ModelBlock> gap = model->blocks();
  gap[1].first_child += 1;
  EXPECT_THROW(model->setBlocks(gap), Error);
  std::vector<ModelBlock> short_of_end = model->blocks();
  short_of_end.pop_back();
  EXPECT_THROW(model->setBlocks(short_of_end), Error);
}

}  // namespace
}  // namespace ringmaster
