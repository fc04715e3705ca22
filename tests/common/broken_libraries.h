// Folders in which a library the engine opens at run time (cuBLAS, NCCL: core/shared_library.h)
// cannot be used, one per way it fails: absent, a file that is no library, and a library of an
// older version that lacks the functions (the tests' own librm_test_answer.so under the library's
// name). A test points RINGMASTER_CUDA_LIBRARY_DIR at each in turn, and catches what is thrown.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "core/error.h"

namespace ringmaster::testing {

struct BrokenLibraryDir {
  std::string what;  // "absent", ...
  std::filesystem::path dir;
  std::string loader_words;  // what the message holds from dlerror()
};

// Makes the folders under `root` (created; the caller removes it) for the library `soname`.
inline std::vector<BrokenLibraryDir> brokenLibraryDirs(const std::filesystem::path& root,
                                                       const std::string& soname) {
  namespace fs = std::filesystem;
  std::vector<BrokenLibraryDir> dirs{
      {"absent", root / "absent", "cannot open shared object file: No such file or directory"},
      {"not a library", root / "not_a_library", "invalid ELF header"},
      {"older, without the functions", root / "older", "undefined symbol"},
  };
  for (const BrokenLibraryDir& entry : dirs) fs::create_directories(entry.dir);
  std::ofstream(dirs[1].dir / soname, std::ios::binary) << std::string(4096, 'x');
  fs::copy_file(fs::path(testBinaryDir()) / "tests/engine/core/librm_test_answer.so",
                dirs[2].dir / soname);
  return dirs;
}

// The Error `f` throws (a test failure when it throws none).
inline Error errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorKind::kInternal, "no error", __FILE__, __LINE__);
}

// Sets RINGMASTER_CUDA_LIBRARY_DIR for its lifetime, and unsets it after.
class CudaLibraryDirOverride {
 public:
  explicit CudaLibraryDirOverride(const std::filesystem::path& dir) {
    ::setenv("RINGMASTER_CUDA_LIBRARY_DIR", dir.c_str(), 1);
  }
  ~CudaLibraryDirOverride() { ::unsetenv("RINGMASTER_CUDA_LIBRARY_DIR"); }
  CudaLibraryDirOverride(const CudaLibraryDirOverride&) = delete;
  CudaLibraryDirOverride& operator=(const CudaLibraryDirOverride&) = delete;
};

}  // namespace ringmaster::testing
