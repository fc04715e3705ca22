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

// The groups of `dim` made on every rank (newGroup needs the same calls everywhere), named by the
// dimension and their lowest rank; this rank's is returned.
std::unique_ptr<Communicator> makeGroups(Communicator& world, const MeshSpec& mesh, MeshDim dim) {
  std::unique_ptr<Communicator> mine;
  for (const std::vector<int>& ranks : meshGroups(mesh, dim)) {
    auto group = world.newGroup(ranks, std::string(toString(dim)) + std::to_string(ranks.front()));
    if (group) mine = std::move(group);
  }
  return mine;
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
        TelemetryCommObserver& observer = *observers[world.rank()];
        auto dp = makeGroups(world, mesh, MeshDim::kDp);
        auto tp = makeGroups(world, mesh, MeshDim::kTp);
        observer.addCommunicator(*dp, "dp");
        observer.addCommunicator(*tp, "tp");
        observer.addCommunicator(*tp, "tp");  // again, under the same name: no change
        // The wrong ones are refused, naming what is wrong.
        EXPECT_THROW(observer.addCommunicator(*tp, "dp"), Error);
        EXPECT_THROW(observer.addCommunicator(*dp, "ep"), Error);
        EXPECT_THROW(observer.addCommunicator(*dp, "DP"), Error);
        EXPECT_THROW(observers[(world.rank() + 1) % kWorld]->addCommunicator(*dp, "dp"), Error);
        for (Communicator* comm : {&world, dp.get(), tp.get()}) {
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
                                                                   : "world";
      EXPECT_EQ(comm->dim, expected) << "rank " << rank << ", group " << comm->group;
      if (comm->op == "all_reduce") ++all_reduces[comm->dim];
    }
    EXPECT_EQ(all_reduces, (std::map<std::string, int>{{"dp", 1}, {"tp", 1}, {"world", 1}}))
        << "rank " << rank;
    std::fclose(files[rank]);
  }
}

}  // namespace
}  // namespace ringmaster
