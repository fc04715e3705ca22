// The datasets a job spec's data section names (datasets.h).
#include "train/datasets.h"

#include "core/error.h"
#include "data/idx_dataset.h"
#include "data/synthetic_dataset.h"
#include "data/text_dataset.h"
#include "data/token_shards.h"

namespace ringmaster {

std::unique_ptr<Dataset> makeDataset(const JobSpec& spec) {
  const DataSpec& data = spec.data;
  switch (data.kind) {
    case DataKind::kSynthetic:
      return std::make_unique<SyntheticTeacherDataset>(data.samples, data.features, data.classes,
                                                       data.seed);
    case DataKind::kIdx:
      return std::make_unique<IdxDataset>(IdxDataset::load(data.images, data.labels));
    case DataKind::kTokens:
      return TokenShardDataset::open(data.train, spec.model.context, spec.model.vocab_size,
                                     "data.train");
    case DataKind::kText:
      return ByteTextDataset::load(data.path, spec.model.context, spec.model.vocab_size,
                                   data.val_fraction, TextSplit::kTrain);
  }
  RM_ENFORCE(false, "unknown data kind");
}

std::unique_ptr<Dataset> makeValidationDataset(const JobSpec& spec) {
  const DataSpec& data = spec.data;
  switch (data.kind) {
    case DataKind::kSynthetic:
    case DataKind::kIdx:
      return nullptr;
    case DataKind::kTokens:
      if (data.val.empty()) return nullptr;
      return TokenShardDataset::open(data.val, spec.model.context, spec.model.vocab_size,
                                     "data.val");
    case DataKind::kText:
      return ByteTextDataset::load(data.path, spec.model.context, spec.model.vocab_size,
                                   data.val_fraction, TextSplit::kValidation);
  }
  RM_ENFORCE(false, "unknown data kind");
}

}  // namespace ringmaster
