// SharedLibrary (issue 32, point 5), on real files: a library opened from the environment's folder
// or the loader's search and its functions called; every way it can fail (absent, not a library,
// a symbol the version lacks, the environment's folder empty) is kUnavailable naming the library,
// the loader's own reason and what to install.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "common/broken_libraries.h"
#include "common/test_paths.h"
#include "core/error.h"
#include "core/shared_library.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using testing::errorOf;

constexpr const char* kDirVariable = "RINGMASTER_TEST_SHARED_LIBRARY_DIR";
// A library built for these tests (shared_library_answer.c), copied under each test's own name:
// the loader hands back a library it holds already, so no name is opened twice.
const fs::path kAnswerLibrary =
    fs::path(testBinaryDir()) / "tests/engine/core/librm_test_answer.so";

class SharedLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_shared_library_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    ::unsetenv(kDirVariable);
  }
  void TearDown() override {
    ::unsetenv(kDirVariable);
    fs::remove_all(dir_);
  }

  // A spec for `soname` whose folder variable is this test's own.
  static SharedLibrarySpec spec(const std::string& soname, const std::string& build_dir = "") {
    return SharedLibrarySpec{.soname = soname,
                             .purpose = "the test's library",
                             .install_hint = "Install the test's package",
                             .build_dir = build_dir,
                             .dir_variable = kDirVariable};
  }

  fs::path dir_;
};

void expectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "\"" << part << "\" is not in: " << text;
}

TEST_F(SharedLibraryTest, OpensByTheLoadersSearchAndCallsAFunctionOfTheHeadersType) {
  SharedLibrary zlib = SharedLibrary::open(spec("libz.so.1"));
  expectContains(zlib.path(), "libz.so.1");
  auto version = RM_LIBRARY_FUNCTION(zlib, zlibVersion);  // the function, called through dlsym
  EXPECT_EQ(std::string(version()).substr(0, 2), "1.") << version();
}

TEST_F(SharedLibraryTest, TheEnvironmentsFolderIsTheOnlyOneSearched) {
  fs::copy_file(kAnswerLibrary, dir_ / "libringmaster_answer_env.so.1");
  ::setenv(kDirVariable, dir_.c_str(), 1);
  SharedLibrary answer = SharedLibrary::open(spec("libringmaster_answer_env.so.1"));
  EXPECT_EQ(answer.path(), (dir_ / "libringmaster_answer_env.so.1").string());
  EXPECT_EQ(answer.function<int (*)()>("ringmaster_test_answer")(), 42);

  // zlib, which the loader's search finds, is not looked for outside the folder.
  Error error = errorOf([] { SharedLibrary::open(spec("libz.so.1")); });
  EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
  expectContains(error.message(), "cannot load libz.so.1 (the test's library)");
  expectContains(error.message(),
                 fmt::format("(the test's library) from {}={}: ", kDirVariable, dir_.string()));
  expectContains(error.message(),
                 (dir_ / "libz.so.1").string() +
                     ": cannot open shared object file: No such file or directory");
  expectContains(error.message(), "Install the test's package");
}

TEST_F(SharedLibraryTest, TheBuildsFolderIsSearchedAfterTheLoaders) {
  fs::copy_file(kAnswerLibrary, dir_ / "libringmaster_answer_build.so.1");
  SharedLibrary answer =
      SharedLibrary::open(spec("libringmaster_answer_build.so.1", dir_.string()));
  EXPECT_EQ(answer.path(), (dir_ / "libringmaster_answer_build.so.1").string());
  EXPECT_EQ(answer.function<int (*)()>("ringmaster_test_answer")(), 42);
}

TEST_F(SharedLibraryTest, AnAbsentLibraryNamesEveryPlaceTriedAndWhatToInstall) {
  const std::string soname = "libringmaster_absent.so.7";
  Error error = errorOf([&] { SharedLibrary::open(spec(soname, dir_.string())); });
  EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
  const std::string& message = error.message();
  expectContains(message, "cannot load " + soname + " (the test's library): ");
  // The loader's own words (dlerror) for its search, then for the build's folder.
  expectContains(message, soname + ": cannot open shared object file: No such file or directory; ");
  expectContains(message, (dir_ / soname).string() + ": cannot open shared object file");
  expectContains(message, fmt::format("Install the test's package, or set {} to the folder that "
                                      "holds {}",
                                      kDirVariable, soname));
}

TEST_F(SharedLibraryTest, AFileThatIsNoLibraryIsRefusedWithTheLoadersReason) {
  for (const std::string& content :
       {std::string(), std::string("not an ELF file"), std::string(8192, '\x7f')}) {
    std::ofstream(dir_ / "libringmaster_broken.so.1", std::ios::binary | std::ios::trunc)
        << content;
    ::setenv(kDirVariable, dir_.c_str(), 1);
    Error error = errorOf([] { SharedLibrary::open(spec("libringmaster_broken.so.1")); });
    EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
    expectContains(error.message(), (dir_ / "libringmaster_broken.so.1").string() + ": ");
    EXPECT_EQ(error.message().find("No such file"), std::string::npos) << error.message();
    expectContains(error.message(), "Install the test's package");
  }
}

TEST_F(SharedLibraryTest, ASymbolTheVersionLacksNamesItTheFileAndWhatToInstall) {
  SharedLibrary zlib = SharedLibrary::open(spec("libz.so.1"));
  for (const char* symbol : {"ringmasterNoSuchFunction", "zlibVersion_v99", ""}) {
    Error error = errorOf([&] { zlib.function<void (*)()>(symbol); });
    EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
    expectContains(error.message(), fmt::format("{} lacks {} (", zlib.path(), symbol));
    expectContains(error.message(), "undefined symbol");  // dlerror's words
    expectContains(error.message(), "Install the test's package");
  }
}

}  // namespace
}  // namespace ringmaster
