// Training checkpoints on disk: owner-only files and directories whatever the umask (issue 16,
// finding 14), and the writability check a run makes before training.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include <filesystem>
#include <string>

#include "checkpoint/safetensors.h"
#include "checkpoint/training_checkpoint.h"
#include "core/error.h"
#include "nn/mlp.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;

class TrainingCheckpointFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ringmaster_ckpt_files_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override {
    ::umask(saved_umask_);
    ::unsetenv("RINGMASTER_UMASK");
    fs::remove_all(dir_);
  }
  static unsigned mode(const fs::path& path) {
    struct stat info {};
    EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
    return info.st_mode & 07777;
  }
  fs::path dir_;
  mode_t saved_umask_ = ::umask(022);
};

// Weights are a team's work: checkpoint files are 0600 and the directories made for them 0700,
// under a permissive umask (0) and a strict one that would take the owner's own bits (0277).
TEST_F(TrainingCheckpointFiles, FilesAndDirectoriesAreOwnerOnlyWhateverTheUmask) {
  auto model = buildMlp({.layers = {4, 3, 2}});
  auto parameters = model->namedParameters();
  Sgd sgd(parameters, {.lr = 0.1f, .momentum = 0.9f});
  for (const mode_t mask : {mode_t{0}, mode_t{0277}}) {
    ::umask(mask);
    const fs::path root = dir_ / std::to_string(mask) / "nested" / "checkpoints";
    saveTrainingCheckpoint(root.string(), 7, parameters, sgd);
    saveModelWeights((root / "consolidated").string(), 7, {{"w", parameters[0].parameter->value}});
    ::umask(022);
    for (const fs::path& made :
         {dir_ / std::to_string(mask), dir_ / std::to_string(mask) / "nested", root,
          root / "step_00000007", root / "consolidated", root / "consolidated" / "step_00000007"}) {
      EXPECT_EQ(mode(made), 0700u) << made << " under umask " << mask;
    }
    for (const fs::path& file : {root / "step_00000007" / "model.safetensors",
                                 root / "step_00000007" / "optimizer.safetensors",
                                 root / "consolidated" / "step_00000007" / "model.safetensors"}) {
      EXPECT_EQ(mode(file), 0600u) << file << " under umask " << mask;
    }
  }
  // RINGMASTER_UMASK=027 shares with the group, as for the database; a bad one is refused.
  ::setenv("RINGMASTER_UMASK", "027", 1);
  saveTrainingCheckpoint((dir_ / "group").string(), 2, parameters, sgd);
  EXPECT_EQ(mode(dir_ / "group" / "step_00000002"), 0750u);
  EXPECT_EQ(mode(dir_ / "group" / "step_00000002" / "model.safetensors"), 0640u);
  ::setenv("RINGMASTER_UMASK", "999", 1);
  EXPECT_THROW(saveTrainingCheckpoint((dir_ / "bad").string(), 2, parameters, sgd), Error);
  ::unsetenv("RINGMASTER_UMASK");
  // A directory the user made keeps the mode the user gave it.
  fs::create_directories(dir_ / "shared");
  fs::permissions(dir_ / "shared", fs::perms::owner_all | fs::perms::group_all);
  saveTrainingCheckpoint((dir_ / "shared").string(), 1, parameters, sgd);
  EXPECT_EQ(mode(dir_ / "shared"), 0770u);
  EXPECT_EQ(mode(dir_ / "shared" / "step_00000001"), 0700u);
}

// The check before training: a path under a regular file (which stops root too) is refused naming
// the directory and the system's reason; a path that does not exist yet but can be made passes,
// and the check leaves nothing behind.
TEST_F(TrainingCheckpointFiles, WritabilityCheckNamesTheDirectoryAndTheReason) {
  fs::create_directories(dir_);
  {
    std::FILE* f = std::fopen((dir_ / "file").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  try {
    checkCheckpointDirWritable((dir_ / "file" / "ckpt").string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(e.message().find((dir_ / "file" / "ckpt").string()), std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("Not a directory"), std::string::npos) << e.message();
  }
  EXPECT_THROW(checkCheckpointDirWritable("/proc/ringmaster-ckpt"), Error);
  checkCheckpointDirWritable((dir_ / "new" / "deeper").string());
  EXPECT_FALSE(fs::exists(dir_ / "new"));
  checkCheckpointDirWritable(dir_.string());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// An fp16 run's loss scaler travels in optimizer.safetensors' metadata: restored exactly; absent
// from a checkpoint written without one (the scaler keeps its initial state); a malformed value
// makes the checkpoint unusable, naming the file, so resuming passes over it.
TEST_F(TrainingCheckpointFiles, TheLossScalerRoundTripsThroughTheOptimizerFile) {
  auto model = buildMlp({.layers = {4, 3, 2}});
  auto parameters = model->namedParameters();
  Sgd sgd(parameters, {.lr = 0.1f});
  GradScaler scaler({.init_scale = std::ldexp(1.0, 40), .growth_interval = 5});
  scaler.update(true);
  scaler.update(false);
  scaler.update(false);
  saveTrainingCheckpoint(dir_.string(), 3, parameters, sgd, &scaler);
  saveTrainingCheckpoint(dir_.string(), 1, parameters, sgd);  // without a scaler

  GradScaler restored({.init_scale = 65536.0, .growth_interval = 5});
  EXPECT_EQ(loadTrainingCheckpoint(checkpointStepDir(dir_.string(), 3), parameters, sgd, &restored),
            3);
  EXPECT_EQ(restored.state(), (GradScalerState{.scale = std::ldexp(1.0, 39), .growth_tracker = 2}));
  GradScaler fresh({.init_scale = 65536.0, .growth_interval = 5});
  loadTrainingCheckpoint(checkpointStepDir(dir_.string(), 1), parameters, sgd, &fresh);
  EXPECT_EQ(fresh.state(), (GradScalerState{.scale = 65536.0, .growth_tracker = 0}));

  // A scale that is not a number, or not a usable one: the checkpoint is refused, and resuming
  // falls back to the older one.
  const std::string optimizer_file = checkpointStepDir(dir_.string(), 3) + "/optimizer.safetensors";
  const SafetensorsFile saved = loadSafetensors(optimizer_file);
  std::vector<std::pair<std::string, Tensor>> tensors(saved.tensors.begin(), saved.tensors.end());
  for (const char* bad : {"many", "0", "inf"}) {
    SCOPED_TRACE(bad);
    auto metadata = saved.metadata;
    metadata["loss_scale"] = bad;
    saveSafetensors(optimizer_file, tensors, metadata);
    try {
      loadTrainingCheckpoint(checkpointStepDir(dir_.string(), 3), parameters, sgd, &restored);
      ADD_FAILURE() << "accepted a loss_scale of " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      EXPECT_NE(std::string(e.what()).find(optimizer_file), std::string::npos) << e.what();
    }
    std::vector<std::string> skipped;
    EXPECT_EQ(loadNewestGoodCheckpoint(
                  dir_.string(), 10, parameters, sgd,
                  [&](const SkippedCheckpoint& c) { skipped.push_back(c.dir); }, &restored),
              1);
    EXPECT_EQ(skipped, std::vector<std::string>{checkpointStepDir(dir_.string(), 3)});
  }
}

}  // namespace
}  // namespace ringmaster
