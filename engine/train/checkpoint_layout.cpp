// The layout a checkpoint directory was written by, and resuming across layouts
// (train/checkpoint_layout.h).
#include "train/checkpoint_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "core/file_modes.h"

namespace ringmaster {

namespace {

std::string layoutPath(const std::string& dir) {
  return dir + "/layout.json";
}

}  // namespace

std::string checkpointLayoutText(const JobSpec& spec) {
  const MeshSpec& mesh = spec.strategy.mesh;
  return fmt::format("dp {} x tp {} x pp {}, dp as {}", mesh.dp, mesh.tp, mesh.pp,
                     spec.strategy.data_parallel);
}

std::optional<std::string> recordedCheckpointLayout(const std::string& dir) {
  const std::string path = layoutPath(dir);
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json document = nlohmann::json::parse(text.str(), nullptr, false);
  if (!document.is_object() || !document.contains("layout") || !document["layout"].is_string())
    RM_THROW(kFormat, fmt::format("{}: expected {{\"layout\": \"...\"}}", path));
  return document["layout"].get<std::string>();
}

void recordCheckpointLayout(const std::string& dir, const JobSpec& spec) {
  std::filesystem::create_directories(dir);
  const std::string path = layoutPath(dir), tmp = path + ".tmp";
  const std::string text = nlohmann::json{{"layout", checkpointLayoutText(spec)}}.dump() + "\n";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, newFileMode());
  if (fd < 0) RM_THROW(kIo, fmt::format("checkpoint.dir: cannot write {}", tmp));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written || std::rename(tmp.c_str(), path.c_str()) != 0)
    RM_THROW(kIo, fmt::format("checkpoint.dir: cannot write {}", path));
}

std::optional<int64_t> resumeFromOtherLayout(const std::string& dir, const JobSpec& spec,
                                             const std::vector<NamedParameter>& parameters,
                                             std::string& note) {
  const std::optional<std::string> recorded = recordedCheckpointLayout(dir);
  const std::string layout = checkpointLayoutText(spec);
  if (!recorded || *recorded == layout) return std::nullopt;
  std::vector<std::string> tried;
  for (int64_t step : checkpointSteps(dir)) {
    const std::string file = checkpointStepDir(dir, step) + "/model.safetensors";
    if (!std::filesystem::exists(file)) continue;
    try {
      loadModelWeights(file, parameters);
    } catch (const Error& e) {
      tried.push_back(fmt::format("\n  {}: {}", file, e.message()));
      continue;
    }
    note = fmt::format(
        "resuming from {} at step {}: the checkpoints were written by layout {}, this run is {}; "
        "the consolidated weights carry over, the optimizer state starts afresh",
        file, step + 1, *recorded, layout);
    return step;
  }
  RM_THROW(kFormat,
           fmt::format("checkpoint.resume: the checkpoints in {} were written by layout {}, this "
                       "run is {}: only a consolidated checkpoint (checkpoint.consolidate) carries "
                       "over between layouts, and {}{}",
                       dir, *recorded, layout,
                       tried.empty() ? "there is none" : "none is usable:", fmt::join(tried, "")));
}

}  // namespace ringmaster
