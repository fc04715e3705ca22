// The Dataset interface without classification: a dataset declares its samples' input and target
// shapes and dtypes, and makeBatch gathers them as declared (int32 token windows here, as a
// language model's data will be); the classification sets declare {features} F32 inputs and {} I32
// targets.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/synthetic_dataset.h"

namespace ringmaster {
namespace {

// Sample i: inputs {i, i+1, i+2, i+3} and targets shifted by one, {i+1, ..., i+4}, as int32.
class TokenWindows : public Dataset {
 public:
  int64_t size() const override { return 10; }
  Shape inputShape() const override { return {4}; }
  DType inputDType() const override { return DType::kI32; }
  Shape targetShape() const override { return {4}; }
  DType targetDType() const override { return DType::kI32; }

 private:
  void fillSamples(std::span<const int64_t> indices, void* inputs_out,
                   void* targets_out) const override {
    auto* inputs = static_cast<int32_t*>(inputs_out);
    auto* targets = static_cast<int32_t*>(targets_out);
    for (size_t k = 0; k < indices.size(); ++k) {
      for (int j = 0; j < 4; ++j) {
        inputs[k * 4 + j] = static_cast<int32_t>(indices[k] + j);
        targets[k * 4 + j] = static_cast<int32_t>(indices[k] + j + 1);
      }
    }
  }
};

std::vector<int32_t> ints(const Tensor& t) {
  return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
}

TEST(Dataset, BatchesHaveTheDeclaredShapesAndDtypes) {
  TokenWindows windows;
  EXPECT_EQ(windows.classCount(), std::nullopt) << "not a classification set";
  Batch batch = makeBatch(windows, std::vector<int64_t>{7, 2});
  EXPECT_EQ(batch.inputs.shape(), (Shape{2, 4}));
  EXPECT_EQ(batch.inputs.dtype(), DType::kI32);
  EXPECT_EQ(batch.targets.shape(), (Shape{2, 4}));
  EXPECT_EQ(batch.targets.dtype(), DType::kI32);
  EXPECT_EQ(ints(batch.inputs), (std::vector<int32_t>{7, 8, 9, 10, 2, 3, 4, 5}));
  EXPECT_EQ(ints(batch.targets), (std::vector<int32_t>{8, 9, 10, 11, 3, 4, 5, 6}));

  Batch none = makeBatch(windows, std::vector<int64_t>{});
  EXPECT_EQ(none.inputs.shape(), (Shape{0, 4}));
  EXPECT_EQ(none.targets.shape(), (Shape{0, 4}));
}

TEST(Dataset, AnIndexOutsideTheSetIsRefusedWhateverTheSamples) {
  TokenWindows windows;
  try {
    makeBatch(windows, std::vector<int64_t>{3, 10});
    FAIL() << "index 10 of a 10-sample set was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("sample index 10"), std::string::npos) << e.message();
  }
}

TEST(Dataset, ClassificationSetsDeclareFeatureVectorsAndClassIndices) {
  SyntheticTeacherDataset teacher(16, 6, 3, 1);
  const Dataset& dataset = teacher;
  EXPECT_EQ(dataset.inputShape(), (Shape{6}));
  EXPECT_EQ(dataset.inputDType(), DType::kF32);
  EXPECT_EQ(dataset.targetShape(), (Shape{}));
  EXPECT_EQ(dataset.targetDType(), DType::kI32);
  EXPECT_EQ(dataset.classCount(), std::optional<int64_t>(3));
}

}  // namespace
}  // namespace ringmaster
