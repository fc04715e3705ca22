// cuBLAS opened at run time (issue 32, point 5): the build links neither cuBLAS nor the shared CUDA
// runtime, and the first matrix product on a CUDA device opens it. Without a device: the toolkit's
// library opens and every function the kernels call resolves; in a folder where it is absent, no
// library, or too old, the error is kUnavailable naming the library, the loader's reason and what
// to install.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "common/broken_libraries.h"
#include "core/error.h"
#include "tensor/cuda/cuda_runtime.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using testing::errorOf;

void expectContains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "\"" << part << "\" is not in: " << text;
}

TEST(CublasLibrary, OpensAndResolvesEveryFunctionWithoutADevice) {
  if (!cuda::kBuiltWithCuda) GTEST_SKIP() << "this build has no CUDA support";
  const fs::path path = cuda::loadCublasLibrary();
  expectContains(path.filename().string(), "libcublas.so.");
}

TEST(CublasLibrary, AnUnusableLibraryIsUnavailableAndSaysWhatToInstall) {
  if (!cuda::kBuiltWithCuda) {
    Error error = errorOf([] { cuda::loadCublasLibrary(); });
    EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
    expectContains(error.message(), "no CUDA support");
    return;
  }
  const std::string soname = fs::path(cuda::loadCublasLibrary()).filename().string();
  const fs::path root =
      fs::temp_directory_path() / ("ringmaster_cublas_library_" + std::to_string(::getpid()));
  for (const auto& broken : testing::brokenLibraryDirs(root, soname)) {
    SCOPED_TRACE(broken.what);
    testing::CudaLibraryDirOverride only_there(broken.dir);
    Error error = errorOf([] { cuda::loadCublasLibrary(); });
    EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
    std::cout << broken.what << ": " << error.message() << "\n";
    expectContains(error.message(), (broken.dir / soname).string());
    expectContains(error.message(), broken.loader_words);
    expectContains(error.message(), "Install cuBLAS of CUDA ");
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace ringmaster
