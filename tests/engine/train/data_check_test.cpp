// checkDataFiles on real files: the problems a launcher shows before launch, each at the field to
// change, and none for data a worker can train on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "data/digits_idx.h"
#include "data/token_shards.h"
#include "train/data_check.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class DataCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_data_check_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    spec_.name = "check";
    spec_.model.layers = {784, 32, 10};
    spec_.data.kind = DataKind::kIdx;
    spec_.data.images = (dir_ / "train-images-idx3-ubyte").string();
    spec_.data.labels = (dir_ / "train-labels-idx1-ubyte").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  JobSpec spec_;
};

TEST_F(DataCheckTest, SyntheticDataHasNothingToCheck) {
  JobSpec synthetic = spec_;
  synthetic.data.kind = DataKind::kSynthetic;
  EXPECT_TRUE(checkDataFiles(synthetic).empty());
}

TEST_F(DataCheckTest, MissingFilesAreNamedAtTheirFields) {
  const std::vector<SpecProblem> problems = checkDataFiles(spec_);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].path, "data.images");
  EXPECT_EQ(problems[0].message, "no file " + spec_.data.images);
  EXPECT_EQ(problems[1].path, "data.labels");

  fs::create_directories(dir_ / "train-labels-idx1-ubyte");
  writeDigitsIdx((dir_ / "elsewhere").string(), 10, 1);
  fs::rename(dir_ / "elsewhere" / "train-images-idx3-ubyte", spec_.data.images);
  const std::vector<SpecProblem> directory = checkDataFiles(spec_);
  ASSERT_EQ(directory.size(), 1u);
  EXPECT_EQ(directory[0].path, "data.labels");
  EXPECT_EQ(directory[0].message, spec_.data.labels + " is not a file");
}

TEST_F(DataCheckTest, GeneratedDigitsPassAndAMismatchedModelIsNamed) {
  writeDigitsIdx(dir_.string(), 50, 1);
  EXPECT_TRUE(checkDataFiles(spec_).empty());

  JobSpec narrow = spec_;
  narrow.model.layers = {100, 32, 5};
  const std::vector<SpecProblem> problems = checkDataFiles(narrow);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].path, "model.layers");
  EXPECT_NE(problems[0].message.find("784 pixels per image, but model.layers[0] is 100"),
            std::string::npos)
      << problems[0].message;
  EXPECT_NE(problems[1].message.find("labels up to 9, but the model has 5 outputs"),
            std::string::npos)
      << problems[1].message;
}

TEST_F(DataCheckTest, AMalformedFileIsNamedWithTheReadersMessage) {
  writeDigitsIdx(dir_.string(), 50, 1);
  std::ofstream(spec_.data.labels, std::ios::trunc) << "garbage";
  const std::vector<SpecProblem> problems = checkDataFiles(spec_);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "data.labels");
  EXPECT_NE(problems[0].message.find("bad magic number"), std::string::npos) << problems[0].message;
}

TEST_F(DataCheckTest, TokenShardsAndTextAreCheckedAtTheirFields) {
  JobSpec tokens = spec_;
  tokens.model = ModelSpec{.kind = "gpt", .vocab_size = 300, .context = 4};
  tokens.data = DataSpec{.kind = DataKind::kTokens,
                         .train = (dir_ / "train_*.bin").string(),
                         .val = (dir_ / "val_*.bin").string()};
  std::vector<SpecProblem> problems = checkDataFiles(tokens);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "data.train");
  EXPECT_EQ(problems[0].message, "nothing matches '" + tokens.data.train + "'");

  const std::vector<uint32_t> good = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  writeTokenShard((dir_ / "train_000.bin").string(), good);
  writeTokenShard((dir_ / "val_000.bin").string(), std::vector<uint32_t>{1, 2, 299, 300, 5, 6});
  problems = checkDataFiles(tokens);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "data.val");
  EXPECT_NE(problems[0].message.find("val_000.bin has token 300 at position 3"), std::string::npos)
      << problems[0].message;
  writeTokenShard((dir_ / "val_000.bin").string(), good);
  EXPECT_TRUE(checkDataFiles(tokens).empty());

  JobSpec text = tokens;
  text.data = DataSpec{.kind = DataKind::kText, .path = (dir_ / "t.txt").string()};
  problems = checkDataFiles(text);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "data.path");
  EXPECT_EQ(problems[0].message, "no file " + text.data.path);
  std::ofstream(text.data.path) << "abc";
  problems = checkDataFiles(text);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].path, "data.path");
  EXPECT_NE(problems[0].message.find("training part (3 bytes"), std::string::npos)
      << problems[0].message;
  std::ofstream(text.data.path) << std::string(100, 'x');
  EXPECT_TRUE(checkDataFiles(text).empty());
}

}  // namespace
}  // namespace ringmaster
