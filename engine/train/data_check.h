// The data a spec names, checked as this machine sees it before anything is launched: for `idx`
// data, files that are missing, unreadable or malformed, and widths the model cannot take, each as
// a problem at the field to change. It reads the files as a worker would (relative paths from the
// working directory); synthetic data has nothing to check.
#pragma once

#include <vector>

#include "spec/job_spec.h"

namespace ringmaster {

// Empty when the data can be loaded and fits the model. Paths: "data.images" or "data.labels"
// for a file's problem, "model.layers" for a width the model does not match. Never throws.
std::vector<SpecProblem> checkDataFiles(const JobSpec& spec);

}  // namespace ringmaster
