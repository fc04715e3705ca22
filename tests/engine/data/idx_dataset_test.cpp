// IDX (MNIST) files: a round trip through writeIdx and IdxDataset::load, and one test per way a
// file can be broken, each checking the error's kind and that its message names file and problem.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/idx_dataset.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class IdxDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_idx_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static void writeRaw(const std::string& path, const Bytes& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  static Bytes readRaw(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
  }

  // Writes a valid pair: `count` images of 2 x 3 pixels and labels i % 4.
  void writePair(uint32_t count, const std::string& images = "images.idx",
                 const std::string& labels = "labels.idx") {
    Bytes pixels(count * 6), values(count);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 37 % 256);
    for (uint32_t i = 0; i < count; ++i) values[i] = static_cast<uint8_t>(i % 4);
    writeIdx(path(images), {count, 2, 3}, pixels);
    writeIdx(path(labels), {count}, values);
  }

  // Loads and returns the error it must raise.
  Error loadError(const std::string& images, const std::string& labels, int64_t classes = 0) {
    try {
      IdxDataset::load(path(images), path(labels), classes);
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "loading " << images << " + " << labels << " did not fail";
    return Error(ErrorKind::kInternal, "", "", 0);
  }

  fs::path dir_;
};

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << part << "\"";
}

TEST_F(IdxDatasetTest, RoundTrip) {
  const Bytes pixels{0, 255, 128, 1, 2, 3, 10, 20, 30, 40, 50, 60};
  writeIdx(path("img"), {2, 2, 3}, pixels);
  writeIdx(path("lab"), {2}, Bytes{7, 2});
  // The header is the MNIST layout: magic, then each dimension as a big-endian u32.
  const Bytes raw = readRaw(path("img"));
  ASSERT_EQ(raw.size(), 16u + 12u);
  EXPECT_EQ(Bytes(raw.begin(), raw.begin() + 16),
            (Bytes{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3}));
  EXPECT_EQ(readRaw(path("lab")), (Bytes{0, 0, 8, 1, 0, 0, 0, 2, 7, 2}));

  const IdxDataset data = IdxDataset::load(path("img"), path("lab"));
  EXPECT_EQ(data.size(), 2);
  EXPECT_EQ(data.rows(), 2);
  EXPECT_EQ(data.cols(), 3);
  EXPECT_EQ(data.features(), 6);
  EXPECT_EQ(data.classes(), 8);  // max label + 1
  EXPECT_EQ(data.label(0), 7);
  std::vector<float> x(12);
  std::vector<int32_t> y(2);
  const std::vector<int64_t> order{1, 0};
  data.fill(order, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<int32_t>{2, 7}));
  for (int j = 0; j < 6; ++j) {
    EXPECT_EQ(x[j], static_cast<float>(pixels[6 + j]) / 255.0f);
    EXPECT_EQ(x[6 + j], static_cast<float>(pixels[j]) / 255.0f);
  }
  EXPECT_EQ(x[6], 0.0f);
  EXPECT_EQ(x[7], 1.0f);

  const Batch batch = makeBatch(data, order);
  EXPECT_EQ(batch.inputs.shape(), (Shape{2, 6}));
  EXPECT_EQ(batch.inputs.toFloatVector(), x);
}

TEST_F(IdxDatasetTest, ExplicitClassCount) {
  writePair(10);
  EXPECT_EQ(IdxDataset::load(path("images.idx"), path("labels.idx")).classes(), 4);
  EXPECT_EQ(IdxDataset::load(path("images.idx"), path("labels.idx"), 10).classes(), 10);
  const Error e = loadError("images.idx", "labels.idx", 3);
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), path("labels.idx")));
  EXPECT_TRUE(contains(e.message(), "label 3 of sample 3 is not below the 3 classes"));
}

TEST_F(IdxDatasetTest, ZeroImagesIsAnEmptyDataset) {
  writePair(0);
  const IdxDataset data = IdxDataset::load(path("images.idx"), path("labels.idx"));
  EXPECT_EQ(data.size(), 0);
  EXPECT_EQ(data.classes(), 0);
}

TEST_F(IdxDatasetTest, MissingFile) {
  writePair(3);
  const Error e = loadError("nope.idx", "labels.idx");
  EXPECT_EQ(e.kind(), ErrorKind::kIo);
  EXPECT_TRUE(contains(e.message(), "cannot open " + path("nope.idx")));
  EXPECT_TRUE(contains(e.message(), "No such file or directory"));
}

TEST_F(IdxDatasetTest, EmptyFile) {
  writePair(3);
  writeRaw(path("empty"), {});
  const Error e = loadError("empty", "labels.idx");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), path("empty") + ": empty file"));
}

TEST_F(IdxDatasetTest, BadMagicNumber) {
  writePair(3);
  // What a still-gzip'ed MNIST file starts with.
  writeRaw(path("gz"), {0x1F, 0x8B, 0x08, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  const Error e = loadError("gz", "labels.idx");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), path("gz") + ": bad magic number 0x1F8B0808, expected "
                                                 "0x00000803"));
}

TEST_F(IdxDatasetTest, WrongDimensions) {
  writePair(3);
  // Files swapped: labels where images belong, and the other way round.
  Error e = loadError("labels.idx", "images.idx");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), path("labels.idx") + ": bad magic number 0x00000801, "
                                                         "expected 0x00000803"));
  EXPECT_TRUE(contains(e.message(), "3 dimension(s), this file has 1"));
  writeIdx(path("labels2d"), {3, 1}, Bytes{0, 1, 2});
  e = loadError("images.idx", "labels2d");
  EXPECT_TRUE(contains(e.message(), path("labels2d") + ": bad magic number 0x00000802, expected "
                                                       "0x00000801"));
}

TEST_F(IdxDatasetTest, UnsupportedTypeCode) {
  writePair(3);
  writeRaw(path("floats"), {0, 0, 0x0D, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  const Error e = loadError("floats", "labels.idx");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), path("floats") + ": unsupported IDX type code 0x0D (float)"));
}

TEST_F(IdxDatasetTest, TruncatedFiles) {
  writePair(3);
  Bytes images = readRaw(path("images.idx"));  // 16 + 18 bytes
  ASSERT_EQ(images.size(), 34u);
  writeRaw(path("short_data"), Bytes(images.begin(), images.end() - 1));
  Error e = loadError("short_data", "labels.idx");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), path("short_data") + ": truncated: expected 34 bytes "
                                                         "(16-byte header + 3 x 2 x 3 pixels), "
                                                         "found 33"));
  writeRaw(path("short_header"), Bytes(images.begin(), images.begin() + 10));
  e = loadError("short_header", "labels.idx");
  EXPECT_TRUE(contains(e.message(), path("short_header") + ": truncated: expected 16 bytes of IDX "
                                                           "header, found 10"));
  writeRaw(path("short_magic"), Bytes{0, 0});
  e = loadError("short_magic", "labels.idx");
  EXPECT_TRUE(contains(e.message(), "expected at least 4 bytes of IDX header, found 2"));
  Bytes labels = readRaw(path("labels.idx"));
  writeRaw(path("short_labels"), Bytes(labels.begin(), labels.end() - 2));
  e = loadError("images.idx", "short_labels");
  EXPECT_TRUE(contains(e.message(), path("short_labels") + ": truncated: expected 11 bytes "
                                                           "(8-byte header + 3 labels), found 9"));
}

TEST_F(IdxDatasetTest, TrailingBytes) {
  writePair(3);
  Bytes images = readRaw(path("images.idx"));
  images.push_back(0);
  writeRaw(path("long"), images);
  const Error e = loadError("long", "labels.idx");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), "trailing bytes after the data: expected 34 bytes"));
  EXPECT_TRUE(contains(e.message(), "found 35"));
}

TEST_F(IdxDatasetTest, CountsMismatch) {
  writePair(3);
  writeIdx(path("four_labels"), {4}, Bytes{0, 1, 2, 3});
  const Error e = loadError("images.idx", "four_labels");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), path("images.idx") + " holds 3 images, but " +
                                        path("four_labels") + " holds 4 labels"));
}

TEST_F(IdxDatasetTest, ImagesWithoutPixels) {
  writeIdx(path("flat"), {2, 0, 5}, Bytes{});
  writeIdx(path("labels"), {2}, Bytes{0, 1});
  const Error e = loadError("flat", "labels");
  EXPECT_EQ(e.kind(), ErrorKind::kFormat);
  EXPECT_TRUE(contains(e.message(), "images of 0 x 5 pixels hold no pixels"));
}

// Issue 16, finding 4: a file's header is checked against its size before anything is read or
// allocated, and only a regular file, whose size is known, is read.
TEST_F(IdxDatasetTest, DevicesAndFifosAreRefusedUnread) {
  writePair(3);
  fs::create_symlink("/dev/zero", dir_ / "zero");
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  for (const char* name : {"zero", "fifo"}) {
    SCOPED_TRACE(name);
    for (bool as_images : {true, false}) {
      const Error e = as_images ? loadError(name, "labels.idx") : loadError("images.idx", name);
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      EXPECT_TRUE(contains(e.message(), path(name) + ": not a regular file"));
    }
  }
  const Error e = loadError(".", "labels.idx");
  EXPECT_TRUE(contains(e.message(), "not a regular file")) << e.message();
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  std::printf("peak memory so far: %ld MiB\n", usage.ru_maxrss / 1024);
}

TEST_F(IdxDatasetTest, HeadersClaimingMoreThanTheFileHoldsAreRefusedBeforeReading) {
  writePair(3);
  const struct {
    std::vector<uint32_t> dims;
    const char* expected;
  } cases[] = {
      {{1u << 31, 1u << 31, 1},
       "expected 4611686018427387920 bytes (16-byte header + "
       "2147483648 x 2147483648 x 1 pixels), found 16"},
      {{0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, "expected more than 2^64 bytes"},
      {{0x7FFFFFFF, 4, 2}, "truncated: expected 17179869192 bytes"},
  };
  for (const auto& c : cases) {
    Bytes header{0, 0, 8, 3};
    for (uint32_t d : c.dims) {
      for (int shift : {24, 16, 8, 0}) header.push_back(static_cast<uint8_t>(d >> shift));
    }
    writeRaw(path("liar"), header);
    const Error e = loadError("liar", "labels.idx");
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_TRUE(contains(e.message(), path("liar") + ": truncated: "));
    EXPECT_TRUE(contains(e.message(), c.expected));
  }
  // A labels file claiming 2^32 - 1 labels in 8 bytes.
  writeRaw(path("liar_labels"), Bytes{0, 0, 8, 1, 0xFF, 0xFF, 0xFF, 0xFF});
  const Error e = loadError("images.idx", "liar_labels");
  EXPECT_TRUE(contains(e.message(),
                       "truncated: expected 4294967303 bytes (8-byte header + "
                       "4294967295 labels), found 8"));
}

TEST_F(IdxDatasetTest, ASparseFileLargerThanMemoryIsRefusedUnread) {
  // 2^16 images of 4096 x 4096 pixels: a 1 TiB file that takes no disk, and labels to match.
  Bytes header{0, 0, 8, 3, 0, 1, 0, 0, 0, 0, 16, 0, 0, 0, 16, 0};
  writeRaw(path("sparse"), header);
  writeRaw(path("sparse_labels"), Bytes{0, 0, 8, 1, 0, 1, 0, 0});
  if (::truncate(path("sparse").c_str(), 16 + (off_t{1} << 40)) != 0 ||
      ::truncate(path("sparse_labels").c_str(), 8 + (1 << 16)) != 0) {
    GTEST_SKIP() << "this file system has no 1 TiB sparse files";
  }
  const Error e = loadError("sparse", "sparse_labels");
  EXPECT_EQ(e.kind(), ErrorKind::kUnavailable);
  EXPECT_TRUE(contains(e.message(), "need 1099511889920 bytes of memory, more than the"))
      << e.message();
}

TEST_F(IdxDatasetTest, WriterChecksItsArguments) {
  EXPECT_THROW(writeIdx(path("bad"), {2, 3}, Bytes{1, 2, 3}), Error);
  try {
    writeIdx((dir_ / "no_such_dir" / "f").string(), {1}, Bytes{1});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_TRUE(contains(e.message(), "No such file or directory"));
  }
}

}  // namespace
}  // namespace ringmaster
