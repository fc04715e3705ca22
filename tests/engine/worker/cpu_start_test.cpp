// Issue 32, point 5: a process on the CPU maps no CUDA library. `ringmaster-node --version`, a
// one-rank worker and two DDP ranks over Gloo run under the loader's trace (LD_DEBUG=files, one
// file per process), which lists every library a process opens or tries to open, linked or
// dlopen'd; none may be cuBLAS(Lt), the CUDA runtime, NCCL or the driver. Before, each of them
// mapped cuBLAS, cuBLASLt, the CUDA runtime and NCCL at start (226 MB resident for --version).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "comm/tcp_store.h"
#include "common/captured_process.h"
#include "common/test_paths.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using testing::CapturedProcess;
using testing::exitedWith;
using namespace std::chrono_literals;

const std::string kNode = std::string(testBinaryDir()) + "/app/ringmaster-node";

// The CUDA libraries, by the start of their file names ("libcuda." is the driver, not libcudart).
const std::vector<std::string> kCudaLibraries = {"libcublas", "libcudart", "libnccl", "libcuda."};

// A small job on the CPU: two steps of an MLP.
// `ranks` local ranks: the mesh of a legacy kind spans launch.hosts' world.
std::string cpuJob(const std::string& strategy, int ranks = 1) {
  return R"({"name": "cpu_start", "strategy": {"kind": ")" + strategy + R"("},
    "launch": {"hosts": [{"host": "localhost", "ranks": )" +
         std::to_string(ranks) + R"(}]},
    "model": {"kind": "mlp", "layers": [16, 8, 4]},
    "data": {"kind": "synthetic", "samples": 64, "features": 16, "classes": 4},
    "train": {"steps": 2, "batch_size": 8}, "optimizer": {"kind": "sgd", "lr": 0.1},
    "backend": "auto", "device": "cpu"})";
}

class CpuStart : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ringmaster_cpu_start_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The environment that makes a process write its loader trace to dir_/trace.<pid>.
  std::map<std::string, std::string> traced(std::map<std::string, std::string> env = {}) const {
    env["LD_DEBUG"] = "files";
    env["LD_DEBUG_OUTPUT"] = (dir_ / "trace").string();
    return env;
  }

  std::string writeSpec(const std::string& text) const {
    const fs::path path = dir_ / "spec.json";
    std::ofstream(path) << text;
    return path.string();
  }

  // Per traced process (its trace file), the file names of the libraries it opened or tried to.
  std::map<std::string, std::set<std::string>> librariesOpened() const {
    std::map<std::string, std::set<std::string>> opened;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("trace.", 0) != 0) continue;
      std::ifstream trace(entry.path());
      std::set<std::string>& libraries = opened[name];
      for (std::string line; std::getline(trace, line);) {
        const size_t at = line.find("file=");
        if (at == std::string::npos) continue;
        const std::string file = line.substr(at + 5, line.find(' ', at) - at - 5);
        libraries.insert(fs::path(file).filename().string());
      }
    }
    return opened;
  }

  // Every traced process's libraries: none is a CUDA library. Checks that there were `processes`
  // traces that name the C library, so that a trace that did not work cannot pass.
  void expectNoCudaLibrary(size_t processes) const {
    const auto opened = librariesOpened();
    ASSERT_EQ(opened.size(), processes) << "one loader trace per process in " << dir_;
    for (const auto& [trace, libraries] : opened) {
      EXPECT_TRUE(libraries.count("libc.so.6")) << trace << " does not list the C library";
      for (const std::string& library : libraries) {
        for (const std::string& cuda : kCudaLibraries) {
          EXPECT_NE(library.rfind(cuda, 0), 0u) << trace << " opened " << library;
        }
      }
    }
  }

  fs::path dir_;
};

TEST_F(CpuStart, VersionOpensNoCudaLibrary) {
  CapturedProcess node(kNode, {"--version"}, traced());
  EXPECT_TRUE(exitedWith(node.wait(30s), 0)) << node.err();
  expectNoCudaLibrary(1);
}

TEST_F(CpuStart, AWorkerTrainingOnTheCpuOpensNoCudaLibrary) {
  CapturedProcess node(kNode, {"worker", "--spec", writeSpec(cpuJob("single"))}, traced());
  EXPECT_TRUE(exitedWith(node.wait(60s), 0)) << node.err();
  EXPECT_NE(node.out().find("\"type\":\"done\""), std::string::npos) << node.out();
  expectNoCudaLibrary(1);
}

// Two ranks in one Gloo group around a store this test hosts, as an agent would.
TEST_F(CpuStart, DdpRanksOverGlooOpenNoCudaLibrary) {
  TcpStoreOptions options;
  options.is_server = true;
  TcpStore store(options);
  const std::string spec = writeSpec(cpuJob("ddp", 2));
  std::vector<std::unique_ptr<CapturedProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(
        std::make_unique<CapturedProcess>(kNode, std::vector<std::string>{"worker", "--spec", spec},
                                          traced({{"MASTER_ADDR", "127.0.0.1"},
                                                  {"MASTER_PORT", std::to_string(store.port())},
                                                  {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                                  {"RANK", std::to_string(rank)},
                                                  {"WORLD_SIZE", "2"}})));
  }
  std::vector<std::future<ExitStatus>> ended;  // each read on its own thread: no pipe fills up
  for (auto& rank : ranks) {
    ended.push_back(std::async(std::launch::async, [&rank] { return rank->wait(60s); }));
  }
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    EXPECT_TRUE(exitedWith(ended[rank].get(), 0)) << "rank " << rank << ": " << ranks[rank]->err();
  }
  expectNoCudaLibrary(2);
}

}  // namespace
}  // namespace ringmaster
