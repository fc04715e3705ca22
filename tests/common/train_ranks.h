// A trainer run as a test drives it: one rank (alone, or one of a communicator's) with its log
// dropped and its telemetry kept and decoded, and a spec trained on N ranks as threads, each rank's
// run collected. For the tests that compare a multi-rank run with one process; the comparison
// itself is each test's.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "engine/comm/comm_harness.h"
#include "spec/job_spec.h"
#include "telemetry/codec.h"
#include "train/trainer.h"

namespace ringmaster::testing {

// A trainer's result and every event it wrote.
struct RankTraining {
  TrainingResult result;
  std::vector<TelemetryEvent> events;
};

// Trains `spec` as `world`'s rank (one process when null) until done or `stop` says so.
inline RankTraining trainRank(
    const JobSpec& spec, Communicator* world = nullptr,
    std::function<bool()> stop = [] { return false; }) {
  std::FILE* stream = std::tmpfile();
  RankTraining run;
  {
    const RankContext context{
        .rank = world ? world->rank() : 0, .world_size = world ? world->size() : 1, .host = "test"};
    TelemetryWriter telemetry(stream, context.rank);
    std::FILE* log = std::fopen("/dev/null", "w");
    Trainer trainer(spec, context, telemetry, std::move(stop), log, world);
    run.result = trainer.run();
    std::fclose(log);
  }
  std::rewind(stream);
  char line[1 << 16];
  while (std::fgets(line, sizeof line, stream) != nullptr) {
    DecodeResult decoded = decodeEvent(line);
    EXPECT_TRUE(decoded.ok()) << line;
    if (decoded.ok()) run.events.push_back(decoded.event());
  }
  std::fclose(stream);
  return run;
}

// Trains `spec` on `world` ranks as threads over loopback `backend`; each rank's run, in rank
// order. A rank's failure fails the test.
inline std::vector<RankTraining> trainOnRanks(const JobSpec& spec, int world,
                                              const std::string& backend = "gloo") {
  std::vector<RankTraining> runs(static_cast<size_t>(world));
  auto failures = runRanks(
      world,
      [&](Communicator& comm) { runs[static_cast<size_t>(comm.rank())] = trainRank(spec, &comm); },
      {}, backend);
  EXPECT_ALL_RANKS_OK(failures);
  return runs;
}

}  // namespace ringmaster::testing
