// meshPicture: the mesh's arithmetic (spec/mesh_layout.h), the pipeline's partition
// (spec/strategies/pipeline.h) and the memory estimate put side by side, rank by rank.
#include "data/mesh_picture.h"

#include <algorithm>

#include "core/error.h"
#include "nn/model.h"
#include "spec/strategies/pipeline.h"
#include "spec/strategies/plan.h"

namespace ringmaster::ui {

namespace {

// The estimate of every rank, or why there is none: a layout the estimate does not cover yet
// (kUnavailable), or a rule of the engine's plan that the parser does not check.
std::vector<RankMemoryEstimate> rankEstimates(const JobSpec& spec, std::string& unavailable) {
  try {
    return estimateMemory(spec);
  } catch (const Error& e) {
    unavailable = e.message();
  } catch (const std::exception& e) {
    unavailable = e.what();
  }
  return {};
}

}  // namespace

std::vector<BlockRange> pipelineStageBlocks(const JobSpec& spec,
                                            const std::vector<int64_t>& block_parameters) {
  const int stages = spec.strategy.mesh.pp * std::max(spec.strategy.pipeline.virtual_stages, 1);
  std::vector<BlockRange> blocks;
  const bool listed = static_cast<int>(spec.strategy.pipeline.stages.size()) == stages;
  if (!listed && (stages < 1 || static_cast<size_t>(stages) > block_parameters.size()))
    return blocks;
  // The spec's stages, else the balanced split: where the runtime cuts.
  const std::vector<size_t> starts = pipelineStageStarts(spec, block_parameters, stages);
  for (size_t s = 0; s < starts.size(); ++s)
    blocks.emplace_back(starts[s], s + 1 < starts.size() ? starts[s + 1] : block_parameters.size());
  return blocks;
}

VocabularySlice vocabularySlice(int64_t vocabulary, int t, int tp) {
  return {.first = t * vocabulary / tp, .end = (t + 1) * vocabulary / tp, .vocabulary = vocabulary};
}

MeshPicture meshPicture(const JobSpec& spec) {
  MeshPicture picture{.mesh = spec.strategy.mesh};
  const ModelDescription description = describeModel(spec.model);
  std::vector<int64_t> block_parameters;
  for (const ModelBlock& block : description.blocks) {
    picture.block_names.push_back(block.name);
    block_parameters.push_back(block.parameters);
  }
  const std::vector<BlockRange> stages = pipelineStageBlocks(spec, block_parameters);
  std::vector<RankMemoryEstimate> estimates = rankEstimates(spec, picture.memory_unavailable);
  const MeshSpec& mesh = picture.mesh;
  for (int rank = 0; rank < mesh.size(); ++rank) {
    MeshRankPicture& shown = picture.ranks.emplace_back();
    shown.rank = rank;
    shown.at = meshCoordinates(mesh, rank);
    // Stage s runs on the pipeline's rank s % pp (virtual stages: every pp-th stage).
    for (size_t s = static_cast<size_t>(shown.at.pp); s < stages.size();
         s += static_cast<size_t>(mesh.pp))
      shown.stages.push_back(stages[s]);
    if (spec.model.vocab_size > 0)
      shown.vocabulary = vocabularySlice(spec.model.vocab_size, shown.at.tp, mesh.tp);
    if (static_cast<size_t>(rank) < estimates.size())
      shown.memory = std::move(estimates[static_cast<size_t>(rank)]);
  }
  if (picture.memory_unavailable.empty() && estimates.size() < picture.ranks.size())
    picture.memory_unavailable = "the estimate does not cover every rank of this layout";
  return picture;
}

}  // namespace ringmaster::ui
