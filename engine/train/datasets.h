// The datasets a job spec's data section names: makeDataset (the training set) and
// makeValidationDataset (the held-out set, where the data kind has one). The factory lives in
// train/ because data/ sits below spec/ and cannot read a JobSpec.
#pragma once

#include <memory>

#include "data/dataset.h"
#include "spec/job_spec.h"

namespace ringmaster {

// The training set of `spec.data` (token kinds window by spec.model.context and check tokens
// against spec.model.vocab_size). A missing or malformed file is a kIo / kFormat error naming it.
std::unique_ptr<Dataset> makeDataset(const JobSpec& spec);

// The validation set: data.val's shards for tokens, the last data.val_fraction of the file for
// text; nullptr for synthetic and idx data and for tokens without data.val.
std::unique_ptr<Dataset> makeValidationDataset(const JobSpec& spec);

}  // namespace ringmaster
