// The files Ringmaster creates (issue 16, findings 2, 8 and 14): written atomically so a reader
// never sees a part, every write and the close checked (a full device is an error naming the
// file), and owner-only unless RINGMASTER_UMASK says otherwise.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "db/files.h"
#include "storage/storage_test_support.h"

namespace ringmaster::storage {
namespace {

namespace fs = std::filesystem;

mode_t modeOf(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_mode & 0777;
}

std::string readWhole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Sets the process umask and RINGMASTER_UMASK for one test and puts both back.
class FilesTest : public testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    fs::create_directories(dir_);
    old_umask_ = ::umask(022);  // the usual one, which left everything world-readable
    ::unsetenv("RINGMASTER_UMASK");
  }
  void TearDown() override {
    ::umask(old_umask_);
    ::unsetenv("RINGMASTER_UMASK");
    StorageTest::TearDown();
  }
  mode_t old_umask_ = 0;
};

TEST_F(FilesTest, AReaderNeverSeesAPartOfAnAtomicallyWrittenFile) {
  const fs::path path = dir_ / "spec.json";
  const std::string a(1 << 20, 'a'), b(1 << 20, 'b');
  writeFileAtomically(path, a);
  std::atomic<bool> done{false};
  int partial = 0, reads = 0;
  std::thread reader([&] {
    while (!done.load()) {
      const std::string seen = readWhole(path);
      ++reads;
      if (seen != a && seen != b) ++partial;
    }
  });
  for (int i = 0; i < 100; ++i) writeFileAtomically(path, i % 2 ? a : b);
  done = true;
  reader.join();
  EXPECT_EQ(partial, 0) << "of " << reads << " reads";
  EXPECT_TRUE(readWhole(path) == a) << "the last write (a) is not what the file holds";
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1) << "a temporary file was left behind";
}

TEST_F(FilesTest, CreatedFilesAndDirectoriesAreOwnerOnlyUnlessRingmasterUmaskSaysOtherwise) {
  writeFileAtomically(dir_ / "spec.json", "{}");
  createDirectories(dir_ / "a" / "b");
  EXPECT_TRUE(createDirectoryExclusive(dir_ / "run-1"));
  OutputFile copy(dir_ / "telemetry.jsonl");
  copy.close();
  EXPECT_EQ(modeOf(dir_ / "spec.json"), 0600u);
  EXPECT_EQ(modeOf(dir_ / "telemetry.jsonl"), 0600u);
  EXPECT_EQ(modeOf(dir_ / "a"), 0700u);
  EXPECT_EQ(modeOf(dir_ / "a" / "b"), 0700u);
  EXPECT_EQ(modeOf(dir_ / "run-1"), 0700u);

  ::setenv("RINGMASTER_UMASK", "027", 1);
  writeFileAtomically(dir_ / "shared.json", "{}");
  createDirectories(dir_ / "shared");
  EXPECT_EQ(modeOf(dir_ / "shared.json"), 0640u);
  EXPECT_EQ(modeOf(dir_ / "shared"), 0750u);

  ::setenv("RINGMASTER_UMASK", "o+r", 1);
  try {
    createDirectories(dir_ / "never");
    FAIL() << "a mask that is not octal was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("RINGMASTER_UMASK=o+r"), std::string::npos) << e.message();
  }
}

TEST_F(FilesTest, ADirectoryIsCreatedExclusivelyOnce) {
  EXPECT_TRUE(createDirectoryExclusive(dir_ / "run-1"));
  EXPECT_FALSE(createDirectoryExclusive(dir_ / "run-1"));
  EXPECT_THROW(createDirectoryExclusive(dir_ / "missing" / "run-1"), Error);
}

TEST_F(FilesTest, AFullDeviceIsAnErrorNamingTheFileAtTheCloseOrTheWrite) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  for (const size_t bytes : {size_t{1}, size_t{100}, size_t{1} << 20}) {
    SCOPED_TRACE(bytes);
    try {
      OutputFile out("/dev/full");
      out.write(std::string(bytes, 'x'));
      out.close();
      FAIL() << "writing to /dev/full succeeded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIo);
      EXPECT_NE(e.message().find("/dev/full"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("No space left on device"), std::string::npos) << e.message();
    }
  }
}

TEST_F(FilesTest, AnAtomicWriteThatFailsLeavesTheOldFileAndNoTemporary) {
  const fs::path path = dir_ / "spec.json";
  writeFileAtomically(path, "old");
  EXPECT_THROW(writeFileAtomically(dir_ / "missing" / "spec.json", "new"), Error);
  fs::create_directories(dir_ / "spec.json.d");
  EXPECT_THROW(writeFileAtomically(dir_ / "spec.json.d", "new"), Error);  // rename onto a dir
  EXPECT_EQ(readWhole(path), "old");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 2);
}

}  // namespace
}  // namespace ringmaster::storage
