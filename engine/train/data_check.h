// The data a spec names, checked as this machine sees it before anything is launched: for `idx`
// data, files that are missing, unreadable or malformed, and widths the model cannot take; for
// token shards and text, what their loaders refuse (no match, a malformed shard, a token outside
// the vocabulary, a part too short for one window); each as a problem at the field to change. It
// reads the files as a worker would (relative paths from the working directory); synthetic data
// has nothing to check.
#pragma once

#include <vector>

#include "spec/job_spec.h"

namespace ringmaster {

// Empty when the data can be loaded and fits the model. Paths: "data.images" or "data.labels"
// for a file's problem, "model.layers" for a width the model does not match; "data.train",
// "data.val" or "data.path" for token data. Never throws.
std::vector<SpecProblem> checkDataFiles(const JobSpec& spec);

}  // namespace ringmaster
