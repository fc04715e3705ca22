// cuBLAS opened at its first use (cublas_library.h) and the per-device handles. The library is
// searched as SharedLibrary::open says, by the name and in the folder the build found it in
// (engine/tensor/CMakeLists.txt passes them).
#include "tensor/cuda/cublas_library.h"

#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/shared_library.h"
#include "tensor/cuda/cuda_runtime.h"

namespace ringmaster::cuda {

namespace {

SharedLibrarySpec cublasSpec() {
  return SharedLibrarySpec{
      .soname = RINGMASTER_CUBLAS_SONAME,
      .purpose = "cuBLAS, for matrix products on CUDA devices",
      .install_hint = fmt::format(
          "Install cuBLAS of CUDA {0} (NVIDIA's package libcublas-{1}, or the CUDA {0} toolkit)",
          RINGMASTER_CUDA_VERSION, RINGMASTER_CUDA_PACKAGE_VERSION),
      .build_dir = RINGMASTER_CUBLAS_DIR,
  };
}

// Every function the kernels call; a library without one of them fails here, not mid-training.
CublasLibrary resolve(const SharedLibrary& library) {
  CublasLibrary functions;
  functions.create = RM_LIBRARY_FUNCTION(library, cublasCreate_v2);
  functions.setMathMode = RM_LIBRARY_FUNCTION(library, cublasSetMathMode);
  functions.getStatusString = RM_LIBRARY_FUNCTION(library, cublasGetStatusString);
  functions.sgemm = RM_LIBRARY_FUNCTION(library, cublasSgemm_v2);
  functions.sgemmStridedBatched = RM_LIBRARY_FUNCTION(library, cublasSgemmStridedBatched);
  functions.gemmEx = library.function<decltype(functions.gemmEx)>("cublasGemmEx");
  functions.gemmStridedBatchedEx =
      library.function<decltype(functions.gemmStridedBatchedEx)>("cublasGemmStridedBatchedEx");
  return functions;
}

}  // namespace

const CublasLibrary& cublas() {
  static const CublasLibrary functions = resolve(SharedLibrary::open(cublasSpec()));
  return functions;
}

std::string loadCublasLibrary() {
  SharedLibrary library = SharedLibrary::open(cublasSpec());
  resolve(library);
  return library.path();
}

cublasHandle_t cublasHandle() {
  int device = 0;
  RM_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  // Never destroyed: at process exit the runtime may be gone before static destructors run, and
  // the driver releases the handles' resources with the context.
  static std::vector<cublasHandle_t> handles;
  std::lock_guard lock(mutex);
  if (static_cast<size_t>(device) >= handles.size()) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr) {
    cublasHandle_t handle = nullptr;
    RM_CUBLAS_CHECK(cublas().create(&handle));  // bound to the current device, default stream
    // Full float32 arithmetic, no TF32 tensor cores: GEMMs then agree with the host's OpenBLAS
    // within float rounding, which the tests check.
    RM_CUBLAS_CHECK(cublas().setMathMode(handle, CUBLAS_DEFAULT_MATH));
    handles[device] = handle;
  }
  return handles[device];
}

}  // namespace ringmaster::cuda
