// Saving and restoring model weights and optimizer state through safetensors files.
#include "checkpoint/training_checkpoint.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace ringmaster {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormatName = "ringmaster-checkpoint-1";

// A step directory resolves to the named file inside it; a file is taken as it is.
std::string resolveFile(const std::string& path, const char* file_name) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return (fs::path(path) / file_name).string();
  return path;
}

fs::path makeStepDir(const std::string& dir, int64_t step) {
  const fs::path step_dir = checkpointStepDir(dir, step);
  std::error_code ec;
  fs::create_directories(step_dir, ec);
  if (ec) {
    RM_THROW(kIo, fmt::format("cannot create checkpoint directory {}: {}", step_dir.string(),
                              ec.message()));
  }
  return step_dir;
}

}  // namespace

std::string saveModelWeights(const std::string& dir, int64_t step,
                             const std::vector<std::pair<std::string, Tensor>>& weights) {
  const fs::path file = makeStepDir(dir, step) / "model.safetensors";
  saveSafetensors(file.string(), weights,
                  {{"format", kFormatName}, {"step", std::to_string(step)}});
  return file.string();
}

std::string saveTrainingCheckpoint(const std::string& dir, int64_t step,
                                   const std::vector<NamedParameter>& parameters,
                                   const Optimizer& optimizer) {
  const fs::path step_dir = makeStepDir(dir, step);
  std::vector<std::pair<std::string, Tensor>> weights;
  for (const auto& named : parameters) weights.emplace_back(named.name, named.parameter->value);
  const std::map<std::string, std::string> metadata{{"format", kFormatName},
                                                    {"step", std::to_string(step)}};
  saveSafetensors((step_dir / "model.safetensors").string(), weights, metadata);

  auto optimizer_metadata = metadata;
  optimizer_metadata["optimizer_step"] = std::to_string(optimizer.stepCount());
  saveSafetensors((step_dir / "optimizer.safetensors").string(), optimizer.stateTensors(),
                  optimizer_metadata);
  return step_dir.string();
}

void loadModelWeights(const std::string& path, const std::vector<NamedParameter>& parameters) {
  const std::string file = resolveFile(path, "model.safetensors");
  SafetensorsFile loaded = loadSafetensors(file);
  std::set<std::string> expected;
  for (const auto& named : parameters) {
    expected.insert(named.name);
    auto it = loaded.tensors.find(named.name);
    if (it == loaded.tensors.end()) {
      RM_THROW(kFormat,
               fmt::format("{}: no tensor '{}' for the model's parameter", file, named.name));
    }
    const Tensor& value = named.parameter->value;
    if (it->second.shape() != value.shape() || it->second.dtype() != value.dtype()) {
      RM_THROW(kFormat,
               fmt::format("{}: tensor '{}' is {} {}, the model's parameter is {} {}", file,
                           named.name, dtypeName(it->second.dtype()), shapeStr(it->second.shape()),
                           dtypeName(value.dtype()), shapeStr(value.shape())));
    }
  }
  for (const auto& [name, tensor] : loaded.tensors) {
    if (!expected.count(name)) {
      RM_THROW(kFormat,
               fmt::format("{}: tensor '{}' is not a parameter of this model", file, name));
    }
  }
  for (const auto& named : parameters) {
    named.parameter->value.copyFrom(loaded.tensors.at(named.name));
  }
}

int64_t loadOptimizerState(const std::string& path, Optimizer& optimizer) {
  const std::string file = resolveFile(path, "optimizer.safetensors");
  SafetensorsFile loaded = loadSafetensors(file);
  auto it = loaded.metadata.find("optimizer_step");
  int64_t step = 0;
  try {
    if (it == loaded.metadata.end()) throw std::invalid_argument("missing");
    step = std::stoll(it->second);
  } catch (const std::exception&) {
    RM_THROW(kFormat, fmt::format("{}: metadata 'optimizer_step' missing or not an integer", file));
  }
  optimizer.loadState(loaded.tensors, step);
  return step;
}

std::string checkpointStepDir(const std::string& dir, int64_t step) {
  return (fs::path(dir) / fmt::format("step_{:08d}", step)).string();
}

std::optional<int64_t> newestCheckpointStep(const std::string& dir) {
  std::error_code error;
  std::optional<int64_t> newest;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 13 || name.rfind("step_", 0) != 0) continue;
    if (name.find_first_not_of("0123456789", 5) != std::string::npos) continue;
    if (!fs::exists(entry.path() / "model.safetensors") ||
        !fs::exists(entry.path() / "optimizer.safetensors"))
      continue;
    const int64_t step = std::stoll(name.substr(5));
    if (!newest || step > *newest) newest = step;
  }
  return newest;
}

std::optional<std::string> newestCheckpoint(const std::string& dir) {
  std::optional<int64_t> step = newestCheckpointStep(dir);
  if (!step) return std::nullopt;
  return checkpointStepDir(dir, *step);
}

}  // namespace ringmaster
