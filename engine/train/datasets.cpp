// The datasets a job spec's data section names (datasets.h).
#include "train/datasets.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/idx_dataset.h"
#include "data/synthetic_dataset.h"

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
    case DataKind::kText:
      RM_THROW(kUnavailable, fmt::format("data.kind '{}' is not built yet", toString(data.kind)));
  }
  RM_ENFORCE(false, "unknown data kind");
}

std::unique_ptr<Dataset> makeValidationDataset(const JobSpec& spec) {
  switch (spec.data.kind) {
    case DataKind::kSynthetic:
    case DataKind::kIdx:
      return nullptr;
    case DataKind::kTokens:
    case DataKind::kText:
      RM_THROW(kUnavailable,
               fmt::format("data.kind '{}' is not built yet", toString(spec.data.kind)));
  }
  RM_ENFORCE(false, "unknown data kind");
}

}  // namespace ringmaster
