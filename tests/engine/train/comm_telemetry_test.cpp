// Issue 34: the comm observer labels each comm event with the mesh dimension of its group. Four
// ranks as threads on a 2 x 2 mesh (dp x tp) make the dp and tp groups with newGroup, add them to
// their observer, and all-reduce on the world and on both groups; every event their telemetry
// writer wrote decodes with the dimension of its group.
#include "train/comm_telemetry.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../comm/comm_harness.h"
#include "parallel/device_mesh.h"
#include "spec/mesh_layout.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

using testing::runRanksWith;

// Every line of a telemetry file, decoded.
std::vector<TelemetryEvent> readEvents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::vector<TelemetryEvent> events;
  char buffer[1 << 16];
  while (std::fgets(buffer, sizeof buffer, file) != nullptr) {
    DecodeResult decoded = decodeEvent(buffer);
    EXPECT_TRUE(decoded.ok()) << buffer;
    if (decoded.ok()) events.push_back(decoded.event());
  }
  return events;
}

TEST(CommTelemetry, EachEventNamesTheMeshDimensionOfItsGroup) {
  const MeshSpec mesh{.dp = 2, .tp = 2, .pp = 1};
  constexpr int kWorld = 4;
  std::vector<std::FILE*> files(kWorld);
  std::vector<std::unique_ptr<TelemetryWriter>> writers;
  std::vector<std::shared_ptr<TelemetryCommObserver>> observers;
  for (int rank = 0; rank < kWorld; ++rank) {
    files[rank] = std::tmpfile();
    ASSERT_NE(files[rank], nullptr);
    writers.push_back(std::make_unique<TelemetryWriter>(files[rank], rank));
    observers.push_back(std::make_shared<TelemetryCommObserver>(*writers.back()));
  }
  const auto failures = runRanksWith(
      kWorld,
      [&](Communicator& world) {
        DeviceMesh device_mesh(world, mesh);
        Communicator& dp = device_mesh.group(MeshDim::kDp);
        Communicator& tp = device_mesh.group(MeshDim::kTp);
        // A group made from a dimension's group (a pipeline's tied-weight group) spans part of it.
        auto part_of_dp = dp.newGroup({0, 1}, "dp.part");
        for (Communicator* comm : {&world, &dp, &tp, part_of_dp.get()}) {
          Tensor t = Tensor::empty({16}, DType::kF32);
          comm->allReduce(t)->wait();
        }
        world.barrier()->wait();
      },
      [&](int rank) {
        CommOptions options;
        options.observer = observers[rank];
        return options;
      });
  ASSERT_TRUE(failures.empty()) << failures.front().rank << ": " << failures.front().message;

  for (int rank = 0; rank < kWorld; ++rank) {
    std::map<std::string, int> all_reduces;  // by dimension
    for (const TelemetryEvent& event : readEvents(files[rank])) {
      const auto* comm = std::get_if<CommEvent>(&event.body);
      if (comm == nullptr) continue;
      const std::string expected = comm->group.starts_with("dp")   ? "dp"
                                   : comm->group.starts_with("tp") ? "tp"
                                   : comm->group.starts_with("pp") ? "pp"
                                                                   : "world";
      EXPECT_EQ(comm->dim, expected) << "rank " << rank << ", group " << comm->group;
      if (comm->op == "all_reduce") ++all_reduces[comm->dim];
    }
    EXPECT_EQ(all_reduces, (std::map<std::string, int>{{"dp", 2}, {"tp", 1}, {"world", 1}}))
        << "rank " << rank;
    std::fclose(files[rank]);
  }
}

}  // namespace
}  // namespace ringmaster
