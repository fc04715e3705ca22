// readBoundedFile (issue 16, finding 4): a file over the bound is refused before it is read, and
// a device or FIFO that never ends is refused once the bound is passed, not read to exhaustion.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/bounded_file.h"
#include "core/error.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class BoundedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_bounded_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

ErrorKind kindOf(const std::function<void()>& f, std::string* message) {
  try {
    f();
  } catch (const Error& e) {
    *message = e.message();
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return ErrorKind::kInternal;
}

TEST_F(BoundedFileTest, ReadsAFileWithinTheBound) {
  const std::string path = (dir_ / "small.json").string();
  std::ofstream(path) << "0123456789";
  EXPECT_EQ(readBoundedFile(path, 10, "job spec"), "0123456789");
  const std::string empty = (dir_ / "empty").string();
  std::ofstream{empty};
  EXPECT_EQ(readBoundedFile(empty, 10, "job spec"), "");
}

TEST_F(BoundedFileTest, ALargerFileIsRefusedNamingFileSizeAndBound) {
  const std::string path = (dir_ / "big.json").string();
  std::ofstream(path) << std::string(2048, 'x');
  std::string message;
  EXPECT_EQ(kindOf([&] { readBoundedFile(path, 1024, "job spec"); }, &message), ErrorKind::kFormat);
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("2 KiB is more than the 1 KiB a job spec may have"), std::string::npos)
      << message;
}

TEST_F(BoundedFileTest, AnEndlessDeviceIsRefusedAtTheBound) {
  std::string message;
  EXPECT_EQ(kindOf([&] { readBoundedFile("/dev/zero", 1 << 20, "hosts file"); }, &message),
            ErrorKind::kFormat);
  EXPECT_NE(message.find("/dev/zero: more than the 1 MiB a hosts file may have"), std::string::npos)
      << message;
}

TEST_F(BoundedFileTest, MissingFileAndDirectoryAreIoErrors) {
  std::string message;
  EXPECT_EQ(kindOf([&] { readBoundedFile((dir_ / "none").string(), 10, "job spec"); }, &message),
            ErrorKind::kIo);
  EXPECT_EQ(kindOf([&] { readBoundedFile(dir_.string(), 10, "job spec"); }, &message),
            ErrorKind::kIo);
  EXPECT_NE(message.find("is a directory"), std::string::npos) << message;
}

}  // namespace
}  // namespace ringmaster
