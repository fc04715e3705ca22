// What the job editor's mesh drawing shows of a valid spec, as plain data (Qt-free): each rank's
// (dp, tp, pp) coordinates (spec/mesh_layout.h), the model blocks of the pipeline stages it runs
// (the spec's strategy.pp.stages when given, else the engine's balanced split by parameter count),
// the vocabulary rows it holds under tensor parallelism, and its memory estimate
// (spec/memory_estimate.h). It draws nothing and checks nothing: the spec parser has.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spec/job_spec.h"
#include "spec/memory_estimate.h"
#include "spec/mesh_layout.h"

namespace ringmaster::ui {

// Model blocks [first, end) (nn/model.h's blocks, in model order).
using BlockRange = std::pair<size_t, size_t>;

// The vocabulary rows [first, end) a rank's embedding and LM head hold; the whole vocabulary when
// tp is 1.
struct VocabularySlice {
  int64_t first = 0, end = 0;
  int64_t vocabulary = 0;  // model.vocab_size
};

struct MeshRankPicture {
  int rank = 0;
  MeshCoordinates at;
  // The blocks of each pipeline stage this rank runs, in model order: one range, or one per
  // virtual stage (interleaved_1f1b).
  std::vector<BlockRange> stages;
  // nullopt for a model without a vocabulary (the MLPs).
  std::optional<VocabularySlice> vocabulary;
  // nullopt when the estimate is unavailable for this layout (MeshPicture::memory_unavailable).
  std::optional<RankMemoryEstimate> memory;
};

struct MeshPicture {
  MeshSpec mesh;
  std::vector<std::string> block_names;  // "embedding", "h.0", ..., "head"
  std::vector<MeshRankPicture> ranks;    // by rank: ranks[r].rank == r
  // Why no rank has a memory estimate (the estimate's message); "" when every rank has one.
  std::string memory_unavailable;
};

// The picture of a spec the parser accepted (an engine job's: a program job's model is the
// script's).
MeshPicture meshPicture(const JobSpec& spec);

// The blocks of each pipeline stage (stageCount(spec) of them, in model order): the spec's
// strategy.pp.stages when given, else the engine's balanced split by parameter count.
std::vector<BlockRange> pipelineStageBlocks(const JobSpec& spec,
                                            const std::vector<int64_t>& block_parameters);

// The vocabulary rows tp rank `t` of `tp` holds: [t * V / tp, (t + 1) * V / tp).
VocabularySlice vocabularySlice(int64_t vocabulary, int t, int tp);

}  // namespace ringmaster::ui
