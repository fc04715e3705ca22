// The generated digits (make-idx): IDX files IdxDataset reads back, MNIST's shape and labels, the
// same bytes for the same seed, and classes that differ from one another while samples vary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "data/digits_idx.h"
#include "data/idx_dataset.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class DigitsIdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_digits_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(DigitsIdxTest, WritesMnistShapedFilesThatLoad) {
  const IdxFilePair files = writeDigitsIdx((dir_ / "data").string(), 500, 7);
  EXPECT_EQ(files.images, (dir_ / "data" / "train-images-idx3-ubyte").string());
  EXPECT_EQ(files.labels, (dir_ / "data" / "train-labels-idx1-ubyte").string());
  const IdxDataset dataset = IdxDataset::load(files.images, files.labels);
  EXPECT_EQ(dataset.size(), 500);
  EXPECT_EQ(dataset.rows(), 28);
  EXPECT_EQ(dataset.cols(), 28);
  EXPECT_EQ(dataset.classes(), 10);
  std::vector<int> per_class(10);
  for (int64_t i = 0; i < dataset.size(); ++i) ++per_class[static_cast<size_t>(dataset.label(i))];
  for (int c = 0; c < 10; ++c) EXPECT_GT(per_class[static_cast<size_t>(c)], 20) << "class " << c;
}

TEST_F(DigitsIdxTest, TheSameSeedGivesTheSameBytesAndAnotherSeedOthers) {
  EXPECT_EQ(drawDigit(3, 11, 42), drawDigit(3, 11, 42));
  EXPECT_NE(drawDigit(3, 11, 42), drawDigit(3, 12, 42));
  EXPECT_NE(drawDigit(3, 11, 42), drawDigit(3, 11, 43));
}

// Mean absolute difference between two images, in grey levels.
double difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return sum / static_cast<double>(a.size());
}

TEST_F(DigitsIdxTest, EachDigitHasInkAndTheClassMeansDiffer) {
  // The mean image of each class over 200 samples: every sample inks some pixels, and any two
  // classes' means differ by more than 5 grey levels per pixel on average.
  std::vector<std::vector<double>> means(10, std::vector<double>(28 * 28));
  for (int digit = 0; digit < 10; ++digit) {
    for (uint64_t i = 0; i < 200; ++i) {
      const std::vector<uint8_t> image = drawDigit(digit, 1, i);
      ASSERT_EQ(image.size(), 28u * 28u);
      int inked = 0;
      for (size_t p = 0; p < image.size(); ++p) {
        means[static_cast<size_t>(digit)][p] += image[p] / 200.0;
        inked += image[p] > 128;
      }
      EXPECT_GT(inked, 30) << "digit " << digit << " sample " << i;
    }
  }
  for (int a = 0; a < 10; ++a) {
    for (int b = a + 1; b < 10; ++b) {
      double sum = 0;
      for (size_t p = 0; p < 28 * 28; ++p)
        sum += std::abs(means[static_cast<size_t>(a)][p] - means[static_cast<size_t>(b)][p]);
      EXPECT_GT(sum / (28 * 28), 5.0) << "digits " << a << " and " << b << " look alike";
    }
  }
  EXPECT_GT(difference(drawDigit(8, 1, 0), drawDigit(8, 1, 1)), 5.0) << "no variation";
}

TEST_F(DigitsIdxTest, RefusesAnEmptySetAndAnUnknownDigit) {
  EXPECT_THROW(writeDigitsIdx(dir_.string(), 0, 1), Error);
  EXPECT_THROW(drawDigit(10, 1, 0), Error);
}

}  // namespace
}  // namespace ringmaster
