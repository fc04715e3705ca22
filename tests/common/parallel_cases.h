// The sweeps over which a strategy's multi-rank run is held to one process: 1 to 4 ranks (3 pads
// FSDP's flat parameters and leaves pipeline stages uneven) times every FSDP sharding and unit, or
// every pipeline schedule, and a readable name for each case ("world3_full_shard_layer").
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "spec/job_spec.h"

namespace ringmaster::testing {

using FsdpCase = std::tuple<int, FsdpSharding, FsdpUnits>;
using PipelineCase = std::tuple<int, PipelineSchedule>;

inline auto everyFsdpCase() {
  return ::testing::Combine(::testing::Values(1, 2, 3, 4),
                            ::testing::Values(FsdpSharding::kFullShard, FsdpSharding::kShardGradOp,
                                              FsdpSharding::kNoShard),
                            ::testing::Values(FsdpUnits::kLayer, FsdpUnits::kModel));
}

inline std::string fsdpCaseName(const ::testing::TestParamInfo<FsdpCase>& info) {
  return "world" + std::to_string(std::get<0>(info.param)) + "_" +
         std::string(toString(std::get<1>(info.param))) + "_" +
         std::string(toString(std::get<2>(info.param)));
}

inline auto everyPipelineCase() {
  return ::testing::Combine(
      ::testing::Values(1, 2, 3, 4),
      ::testing::Values(PipelineSchedule::kGpipe, PipelineSchedule::k1f1b,
                        PipelineSchedule::kInterleaved1f1b, PipelineSchedule::kZbH1));
}

inline std::string pipelineCaseName(const ::testing::TestParamInfo<PipelineCase>& info) {
  return "world" + std::to_string(std::get<0>(info.param)) + "_" +
         std::string(toString(std::get<1>(info.param)));
}

}  // namespace ringmaster::testing
