// Saving, checking and restoring model weights and optimizer state through safetensors files.
#include "checkpoint/training_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/file_modes.h"

namespace ringmaster {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormatName = "ringmaster-checkpoint-1";
constexpr const char* kChecksumKey = "crc32";
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
// An fp16 run's GradScaler state, in optimizer.safetensors' metadata.
constexpr const char* kLossScaleKey = "loss_scale";
constexpr const char* kGrowthTrackerKey = "loss_scale_growth_tracker";

// ---------------------------------------------------------------------------------------------
// Checksums: zlib's CRC-32 (IEEE 802.3) over each tensor's name, dtype, shape and bytes, in
// name order, so a flipped bit in the data or a renamed or reshaped tensor is caught.

// zlib's crc32 takes its length as a uInt: a tensor over 4 GiB is fed in pieces.
uint32_t crc32Update(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const Bytef*>(data);
  constexpr size_t kPiece = size_t{1} << 30;
  while (size > 0) {
    const size_t n = std::min(size, kPiece);
    crc = static_cast<uint32_t>(::crc32(crc, bytes, static_cast<uInt>(n)));
    bytes += n;
    size -= n;
  }
  return crc;
}

// `tensors` must be on the host and sorted by name.
std::string checksumOf(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  uint32_t crc = 0;
  for (const auto& [name, tensor] : tensors) {
    const std::string description =
        fmt::format("{}\n{}\n{}\n", name, dtypeName(tensor.dtype()), shapeStr(tensor.shape()));
    crc = crc32Update(crc, description.data(), description.size());
    if (tensor.nbytes() > 0) crc = crc32Update(crc, tensor.raw(), tensor.nbytes());
  }
  return fmt::format("{:08x}", crc);
}

// Host copies of `tensors`, sorted by name: what is written, and what the checksum covers.
std::vector<std::pair<std::string, Tensor>> onHostByName(
    std::vector<std::pair<std::string, Tensor>> tensors) {
  for (auto& [name, tensor] : tensors) {
    if (tensor.defined() && tensor.device().isCuda()) tensor = tensor.to(Device::cpu());
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return tensors;
}

void writeChecked(const fs::path& file, const std::vector<std::pair<std::string, Tensor>>& tensors,
                  std::map<std::string, std::string> metadata) {
  const auto host = onHostByName(tensors);
  metadata[kChecksumKey] = checksumOf(host);
  saveSafetensors(file.string(), host, metadata, newFileMode());
}

// Reads a file and checks its checksum when it has one (files written before checksums, or by
// other tools, have none).
SafetensorsFile readChecked(const std::string& file) {
  SafetensorsFile loaded = loadSafetensors(file);
  auto recorded = loaded.metadata.find(kChecksumKey);
  if (recorded != loaded.metadata.end()) {
    const std::vector<std::pair<std::string, Tensor>> tensors(loaded.tensors.begin(),
                                                              loaded.tensors.end());
    const std::string actual = checksumOf(tensors);
    if (actual != recorded->second) {
      RM_THROW(kFormat, fmt::format("{}: checksum mismatch: the file records crc32 {}, its "
                                    "tensors have {} (the file is damaged)",
                                    file, recorded->second, actual));
    }
  }
  return loaded;
}

// ---------------------------------------------------------------------------------------------
// Directories

// Makes `path` and its missing parents, each 0777 less the creation mask (0700) whatever the
// umask; existing ones keep their mode.
void makePrivateDirectories(const fs::path& path) {
  const mode_t mode = newDirectoryMode();
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = path; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0700) != 0 && errno != EEXIST) {
      RM_THROW(kIo, fmt::format("cannot create checkpoint directory {}: {}", it->string(),
                                std::strerror(errno)));
    }
    if (::chmod(it->c_str(), mode) != 0) {
      RM_THROW(kIo, fmt::format("cannot set the mode of checkpoint directory {}: {}", it->string(),
                                std::strerror(errno)));
    }
  }
  if (!fs::is_directory(path, ec)) {
    RM_THROW(kIo, fmt::format("cannot create checkpoint directory {}: {}", path.string(),
                              std::strerror(ENOTDIR)));
  }
}

fs::path makeStepDir(const std::string& dir, int64_t step) {
  const fs::path step_dir = checkpointStepDir(dir, step);
  makePrivateDirectories(step_dir);
  return step_dir;
}

// The step a directory named step_<at least 8 digits> holds (8 digits pad it; a step past
// 99,999,999 has more), or nullopt for any other name.
std::optional<int64_t> stepOfDirectoryName(const std::string& name) {
  if (name.size() < 13 || name.size() > 23 || !name.starts_with("step_")) return std::nullopt;
  if (name.find_first_not_of("0123456789", 5) != std::string::npos) return std::nullopt;
  return std::stoll(name.substr(5));
}

// A step directory resolves to the named file inside it; a file is taken as it is.
std::string resolveFile(const std::string& path, const char* file_name) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return (fs::path(path) / file_name).string();
  return path;
}

// The integer a file's metadata records under `key` (kFormat when missing or not an integer).
int64_t metadataInteger(const std::string& file, const SafetensorsFile& loaded,
                        const std::string& key) {
  auto it = loaded.metadata.find(key);
  try {
    if (it == loaded.metadata.end()) throw std::invalid_argument("missing");
    size_t used = 0;
    const int64_t value = std::stoll(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing characters");
    return value;
  } catch (const std::exception&) {
    RM_THROW(kFormat, fmt::format("{}: metadata '{}' missing or not an integer", file, key));
  }
}

// The scaler state an optimizer file's metadata records, or nullopt where it records none (a run
// without loss scaling). kFormat for a scale that is not a number or a tracker that is not an
// integer; the values' ranges are GradScaler::loadState's to check.
std::optional<GradScalerState> scalerStateOf(const std::string& file,
                                             const SafetensorsFile& loaded) {
  const auto it = loaded.metadata.find(kLossScaleKey);
  if (it == loaded.metadata.end()) return std::nullopt;
  GradScalerState state;
  try {
    size_t used = 0;
    state.scale = std::stod(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing characters");
  } catch (const std::exception&) {
    RM_THROW(kFormat, fmt::format("{}: metadata '{}' is not a number: '{}'", file, kLossScaleKey,
                                  it->second));
  }
  state.growth_tracker = metadataInteger(file, loaded, kGrowthTrackerKey);
  return state;
}

// Checks that `loaded` holds exactly the model's parameters, each with its shape and dtype.
void checkModelTensors(const std::string& file, const SafetensorsFile& loaded,
                       const std::vector<NamedParameter>& parameters) {
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
}

// A Hugging Face GPT-2 file in the model's terms (names the model has are left alone): the
// "transformer." prefix of GPT2LMHeadModel's names dropped, the attention's mask buffers
// (h.<i>.attn.bias, h.<i>.attn.masked_bias) skipped, and "lm_head.weight", tied to the token
// embedding, checked equal to wte.weight and skipped.
void adoptHuggingFaceNames(const std::string& file, SafetensorsFile& loaded,
                           const std::vector<NamedParameter>& parameters) {
  std::set<std::string> names;
  for (const auto& named : parameters) names.insert(named.name);
  if (!names.count("wte.weight")) return;  // not a GPT
  static const std::regex buffer(R"(h\.[0-9]+\.attn\.(bias|masked_bias))");
  std::map<std::string, Tensor> adopted;
  std::optional<Tensor> lm_head;
  for (auto& [name, tensor] : loaded.tensors) {
    std::string own = name;
    if (!names.count(own) && own.starts_with("transformer.")) own = own.substr(12);
    if (names.count(own)) {
      if (!adopted.emplace(own, tensor).second)
        RM_THROW(kFormat, fmt::format("{}: tensor '{}' appears twice (with and without "
                                      "'transformer.')",
                                      file, own));
    } else if (own == "lm_head.weight") {
      lm_head = tensor;
    } else if (!std::regex_match(own, buffer)) {
      adopted.emplace(name, tensor);  // refused by checkModelTensors, by its name in the file
    }
  }
  if (lm_head) {
    auto wte = adopted.find("wte.weight");
    if (wte == adopted.end() || lm_head->shape() != wte->second.shape() ||
        lm_head->toFloatVector() != wte->second.toFloatVector()) {
      RM_THROW(kFormat, fmt::format("{}: tensor 'lm_head.weight' differs from 'wte.weight', but "
                                    "this model ties its LM head to the token embedding",
                                    file));
    }
  }
  loaded.tensors = std::move(adopted);
}

void copyModelTensors(const SafetensorsFile& loaded,
                      const std::vector<NamedParameter>& parameters) {
  for (const auto& named : parameters) {
    named.parameter->value.copyFrom(loaded.tensors.at(named.name));
  }
}

}  // namespace

std::string saveModelWeights(const std::string& dir, int64_t step,
                             const std::vector<std::pair<std::string, Tensor>>& weights) {
  const fs::path file = makeStepDir(dir, step) / kModelFile;
  writeChecked(file, weights, {{"format", kFormatName}, {"step", std::to_string(step)}});
  return file.string();
}

std::string saveTrainingCheckpoint(const std::string& dir, int64_t step,
                                   const std::vector<NamedParameter>& parameters,
                                   const Optimizer& optimizer, const GradScaler* scaler) {
  const fs::path step_dir = makeStepDir(dir, step);
  std::vector<std::pair<std::string, Tensor>> weights;
  for (const auto& named : parameters) weights.emplace_back(named.name, named.parameter->value);
  const std::map<std::string, std::string> metadata{{"format", kFormatName},
                                                    {"step", std::to_string(step)}};
  writeChecked(step_dir / kModelFile, weights, metadata);

  auto optimizer_metadata = metadata;
  optimizer_metadata["optimizer_step"] = std::to_string(optimizer.stepCount());
  if (scaler != nullptr) {
    // The shortest decimal that reads back as the same double.
    optimizer_metadata[kLossScaleKey] = fmt::format("{}", scaler->scale());
    optimizer_metadata[kGrowthTrackerKey] = std::to_string(scaler->growthTracker());
  }
  writeChecked(step_dir / kOptimizerFile, optimizer.stateTensors(), optimizer_metadata);
  return step_dir.string();
}

void checkCheckpointDirWritable(const std::string& dir) {
  const auto refuse = [&](const std::string& reason) {
    RM_THROW(kIo, fmt::format("checkpoint.dir: cannot write checkpoints to {}: {}", dir, reason));
  };
  // The nearest part of the path that exists: `dir` itself, or where it would be made.
  std::error_code ec;
  fs::path existing = fs::absolute(dir, ec);
  if (ec) refuse(ec.message());
  while (!fs::exists(existing, ec) && existing.has_relative_path()) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, ec)) {
    refuse(fmt::format("{} is not a directory ({})", existing.string(), std::strerror(ENOTDIR)));
  }
  std::string probe = (existing / ".ringmaster-write-test-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    const int error = errno;
    refuse(existing == fs::absolute(dir) ? std::strerror(error)
                                         : fmt::format("cannot create it in {}: {}",
                                                       existing.string(), std::strerror(error)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void loadModelWeights(const std::string& path, const std::vector<NamedParameter>& parameters) {
  const std::string file = resolveFile(path, kModelFile);
  SafetensorsFile loaded = readChecked(file);
  adoptHuggingFaceNames(file, loaded, parameters);
  checkModelTensors(file, loaded, parameters);
  copyModelTensors(loaded, parameters);
}

int64_t loadOptimizerState(const std::string& path, Optimizer& optimizer) {
  const std::string file = resolveFile(path, kOptimizerFile);
  const SafetensorsFile loaded = readChecked(file);
  const int64_t step = metadataInteger(file, loaded, "optimizer_step");
  optimizer.loadState(loaded.tensors, step);
  return step;
}

int64_t loadTrainingCheckpoint(const std::string& step_dir,
                               const std::vector<NamedParameter>& parameters, Optimizer& optimizer,
                               GradScaler* scaler) {
  const std::string model_file = (fs::path(step_dir) / kModelFile).string();
  const std::string optimizer_file = (fs::path(step_dir) / kOptimizerFile).string();
  const SafetensorsFile model = readChecked(model_file);
  const SafetensorsFile state = readChecked(optimizer_file);
  const std::string name = fs::path(step_dir).filename().string();
  const int64_t step = stepOfDirectoryName(name).value_or(-1);
  for (const auto& [file, loaded] : {std::pair(&model_file, &model), {&optimizer_file, &state}}) {
    const int64_t recorded = metadataInteger(*file, *loaded, "step");
    if (recorded != step) {
      RM_THROW(kFormat, fmt::format("{}: records step {}, but lies in {}", *file, recorded, name));
    }
  }
  checkModelTensors(model_file, model, parameters);
  const int64_t optimizer_step = metadataInteger(optimizer_file, state, "optimizer_step");
  const std::optional<GradScalerState> scaler_state =
      scaler != nullptr ? scalerStateOf(optimizer_file, state) : std::nullopt;
  try {
    optimizer.loadState(state.tensors, optimizer_step);
    if (scaler_state) scaler->loadState(*scaler_state);
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("{}: {}", optimizer_file, e.message()), __FILE__, __LINE__);
  }
  copyModelTensors(model, parameters);
  return step;
}

std::string checkpointStepDir(const std::string& dir, int64_t step) {
  return (fs::path(dir) / fmt::format("step_{:08d}", step)).string();
}

std::vector<int64_t> checkpointSteps(const std::string& dir) {
  std::error_code error;
  std::vector<int64_t> steps;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::optional<int64_t> step = stepOfDirectoryName(entry.path().filename().string());
    if (step && entry.is_directory(error)) steps.push_back(*step);
  }
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

std::optional<int64_t> loadNewestGoodCheckpoint(
    const std::string& dir, int64_t at_most, const std::vector<NamedParameter>& parameters,
    Optimizer& optimizer, const std::function<void(const SkippedCheckpoint&)>& skipped,
    GradScaler* scaler) {
  for (const int64_t step : checkpointSteps(dir)) {
    if (step > at_most) continue;
    const std::string step_dir = checkpointStepDir(dir, step);
    std::vector<std::string> missing;
    std::error_code ec;
    for (const char* file : {kModelFile, kOptimizerFile}) {
      if (!fs::exists(fs::path(step_dir) / file, ec)) missing.push_back(file);
    }
    if (!missing.empty()) {
      skipped(
          {.dir = step_dir,
           .reason = fmt::format("{} {} missing (an incomplete checkpoint)",
                                 fmt::join(missing, " and "), missing.size() == 1 ? "is" : "are"),
           .incomplete = true});
      continue;
    }
    try {
      return loadTrainingCheckpoint(step_dir, parameters, optimizer, scaler);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kFormat && e.kind() != ErrorKind::kIo) throw;
      skipped({.dir = step_dir, .reason = e.message()});
    }
  }
  return std::nullopt;
}

}  // namespace ringmaster
