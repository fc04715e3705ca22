// The NCCL backend on a real GPU: the same checks as the Gloo suite on CUDA tensors, one rank per
// thread sharing device 0 is not allowed by NCCL, so these run with as many ranks as devices
// (at least one) and skip with a message where the build or the machine has no GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "comm_harness.h"
#include "comm_values.h"
#include "common/broken_libraries.h"
#include "tensor/device.h"
#if RINGMASTER_HAVE_NCCL
#include "comm/nccl/nccl_backend.h"
#endif

namespace ringmaster {
namespace {

using namespace ringmaster::testing;

// Skips the calling test where the build has no NCCL or the machine too few GPUs.
#define REQUIRE_NCCL(ranks)                                                                      \
  do {                                                                                           \
    if (!backendAvailable("nccl")) GTEST_SKIP() << "built without NCCL (no CUDA toolkit found)"; \
    if (cudaDeviceCount() < (ranks)) {                                                           \
      GTEST_SKIP() << "needs " << (ranks) << " CUDA device(s), this machine has "                \
                   << cudaDeviceCount();                                                         \
    }                                                                                            \
  } while (0)

// Runs body on `ranks` threads over NCCL, rank r driving CUDA device r.
std::vector<RankFailure> runNcclRanks(int ranks, const std::function<void(Communicator&)>& body) {
  return runRanks(ranks, body, {}, "nccl");
}

TEST(Nccl, EveryCollectiveMatchesTheHostReference) {
  REQUIRE_NCCL(1);
  int ranks = std::min(cudaDeviceCount(), 4);
  auto failures = runNcclRanks(ranks, [&](Communicator& comm) {
    const int n = comm.size();
    Device gpu = comm.device();
    auto rankInput = [](int r, int64_t i) { return (r + 1) + (i % 5); };
    for (DType dtype :
         {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBF16, DType::kF16}) {
      std::vector<ReduceOp> ops{ReduceOp::sum(), ReduceOp::avg(), ReduceOp::min(), ReduceOp::max()};
      if (isFloating(dtype))
        ops.push_back(ReduceOp::premulSum(0.5));
      else
        ops.push_back(ReduceOp::bxor());
      for (ReduceOp op : ops) {
        std::vector<Tensor> inputs;
        for (int r = 0; r < n; ++r)
          inputs.push_back(makeTensor(dtype, 1001, [&](int64_t i) { return rankInput(r, i); }));
        Tensor t = inputs[static_cast<size_t>(comm.rank())].to(gpu);
        comm.allReduce(t, op)->wait();
        ASSERT_TRUE(sameValues(t.to(Device::cpu()), referenceReduce(inputs, op)))
            << toString(op.kind) << " " << commDTypeName(dtype);
      }
    }
    Tensor in =
        makeTensor(DType::kF32, 33, [&](int64_t i) { return rankInput(comm.rank(), i); }).to(gpu);
    Tensor gathered = Tensor::empty({33 * n}, DType::kF32, gpu);
    comm.allGather(gathered, in)->wait();
    ASSERT_TRUE(
        sameValues(gathered.to(Device::cpu()), makeTensor(DType::kF32, 33 * n, [&](int64_t j) {
                     return rankInput(static_cast<int>(j / 33), j % 33);
                   })));
    Tensor b =
        makeTensor(DType::kI64, 9, [&](int64_t i) { return comm.rank() == 0 ? i : -1; }).to(gpu);
    comm.broadcast(b, 0)->wait();
    ASSERT_TRUE(sameValues(b.to(Device::cpu()), makeTensor(DType::kI64, 9, [](int64_t i) {
                             return static_cast<double>(i);
                           })));
    comm.barrier()->wait();
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST(Nccl, RefusesHostTensorsWithAClearMessage) {
  REQUIRE_NCCL(1);
  auto failures = runNcclRanks(1, [&](Communicator& comm) {
    Tensor host = Tensor::empty({4}, DType::kF32);
    try {
      comm.allReduce(host);
      FAIL() << "accepted a host tensor";
    } catch (const Error& e) {
      EXPECT_NE(e.message().find("the nccl backend works on cuda:0"), std::string::npos)
          << e.message();
    }
  });
  EXPECT_ALL_RANKS_OK(failures);
}

TEST(Nccl, UnavailableWithoutADevice) {
  if (!backendAvailable("nccl")) GTEST_SKIP() << "built without NCCL";
  if (cudaDeviceCount() > 0)
    GTEST_SKIP() << "this machine has a GPU; the no-device path is not reachable";
  auto failures = runNcclRanks(1, [](Communicator&) {});
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].message.find("needs a CUDA device"), std::string::npos)
      << failures[0].message;
}

// Issue 32, point 5: NCCL is opened when the first nccl communicator connects, not linked. Without
// a device: the toolkit's library opens and every function the backend calls resolves.
TEST(NcclLibrary, OpensAndResolvesEveryFunctionWithoutADevice) {
#if RINGMASTER_HAVE_NCCL
  const std::filesystem::path path = NcclBackend::loadLibrary();
  EXPECT_NE(path.filename().string().find("libnccl.so."), std::string::npos) << path;
#else
  GTEST_SKIP() << "built without NCCL";
#endif
}

// In a folder where NCCL is absent, no library, or too old: kUnavailable naming the library, the
// loader's reason and what to install.
TEST(NcclLibrary, AnUnusableLibraryIsUnavailableAndSaysWhatToInstall) {
#if RINGMASTER_HAVE_NCCL
  namespace fs = std::filesystem;
  const std::string soname = fs::path(NcclBackend::loadLibrary()).filename().string();
  const fs::path root =
      fs::temp_directory_path() / ("ringmaster_nccl_library_" + std::to_string(::getpid()));
  for (const auto& broken : brokenLibraryDirs(root, soname)) {
    SCOPED_TRACE(broken.what);
    CudaLibraryDirOverride only_there(broken.dir);
    Error error = errorOf([] { NcclBackend::loadLibrary(); });
    EXPECT_EQ(error.kind(), ErrorKind::kUnavailable);
    std::cout << broken.what << ": " << error.message() << "\n";
    const std::string& message = error.message();
    EXPECT_NE(message.find((broken.dir / soname).string()), std::string::npos) << message;
    EXPECT_NE(message.find(broken.loader_words), std::string::npos) << message;
    EXPECT_NE(message.find("Install NCCL "), std::string::npos) << message;
  }
  fs::remove_all(root);
#else
  GTEST_SKIP() << "built without NCCL";
#endif
}

}  // namespace
}  // namespace ringmaster
