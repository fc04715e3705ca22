// Loads the data set once, as a worker does, and turns what goes wrong into spec problems.
#include "train/data_check.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "data/idx_dataset.h"
#include "train/datasets.h"

namespace ringmaster {

namespace fs = std::filesystem;

namespace {

// Token shards and text: both sets built as a worker builds them; a loader's error is reported at
// the field its message starts with ("data.train: ...", "data.val: ...", "data.path: ...").
std::vector<SpecProblem> checkTokenData(const JobSpec& spec) {
  const std::string field = spec.data.kind == DataKind::kTokens ? "data.train" : "data.path";
  try {
    makeDataset(spec);
    makeValidationDataset(spec);
  } catch (const Error& e) {
    std::string path = field, message = e.message();
    for (const char* known : {"data.train", "data.val", "data.path"}) {
      const std::string prefix = std::string(known) + ": ";
      if (message.starts_with(prefix)) {
        path = known;
        message.erase(0, prefix.size());
      }
    }
    return {{path, message}};
  }
  return {};
}

}  // namespace

std::vector<SpecProblem> checkDataFiles(const JobSpec& spec) {
  std::vector<SpecProblem> problems;
  const auto missing = [&](const std::string& field, const std::string& path) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return false;
    const std::string where = fs::path(path).is_relative()
                                  ? fmt::format(" (from {})", fs::current_path(ec).string())
                                  : "";
    problems.push_back({field, fs::exists(path, ec) ? fmt::format("{}{} is not a file", path, where)
                                                    : fmt::format("no file {}{}", path, where)});
    return true;
  };
  if (spec.data.kind == DataKind::kText && missing("data.path", spec.data.path)) return problems;
  if (spec.data.kind == DataKind::kTokens || spec.data.kind == DataKind::kText)
    return checkTokenData(spec);
  if (spec.data.kind != DataKind::kIdx) return {};
  const bool images_missing = missing("data.images", spec.data.images);
  const bool labels_missing = missing("data.labels", spec.data.labels);
  if (images_missing || labels_missing) return problems;
  try {
    // IdxDataset directly rather than the trainer's makeDataset: a launcher links this file
    // without the training loop.
    const IdxDataset loaded = IdxDataset::load(spec.data.images, spec.data.labels);
    const IdxDataset* dataset = &loaded;
    if (dataset->features() != spec.model.layers.front()) {
      problems.push_back({"model.layers", fmt::format("{} has {} pixels per image, but "
                                                      "model.layers[0] is {}",
                                                      spec.data.images, dataset->features(),
                                                      spec.model.layers.front())});
    }
    if (dataset->classes() > spec.model.layers.back()) {
      problems.push_back({"model.layers", fmt::format("{} has labels up to {}, but the model has "
                                                      "{} outputs",
                                                      spec.data.labels, dataset->classes() - 1,
                                                      spec.model.layers.back())});
    }
  } catch (const Error& e) {
    // The reader's message names the file; a problem of both (their counts) goes to the images.
    const bool labels_only = spec.data.labels != spec.data.images &&
                             e.message().find(spec.data.labels) != std::string::npos &&
                             e.message().find(spec.data.images) == std::string::npos;
    problems.push_back({labels_only ? "data.labels" : "data.images", e.message()});
  }
  return problems;
}

}  // namespace ringmaster
