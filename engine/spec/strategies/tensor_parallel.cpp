// The tensor-parallel plan (strategy.tp, over strategy.mesh.tp; Megatron-LM): its option
// (sequence_parallel) and what a layout of tp ranks needs of the model. The memory of a layout
// with tp is meshMemory's.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "spec/strategies/plan.h"

namespace ringmaster {

namespace {

// The model kinds whose layers have tensor-parallel forms (nn/: column- and row-parallel linears,
// the vocabulary-parallel embedding and head).
constexpr std::array<std::string_view, 1> kTensorParallelModels = {"gpt"};

class TensorParallelPlan final : public DimensionPlan {
 public:
  MeshDim dim() const override { return MeshDim::kTp; }
  std::string_view name() const override { return "tp"; }
  std::vector<std::string_view> optionKeys() const override { return {"sequence_parallel"}; }
  void readOptions(OptionReader& reader, StrategySpec& out) const override {
    reader.boolean("sequence_parallel", out.tp.sequence_parallel);
  }
  void writeOptions(const StrategySpec& spec, nlohmann::json& block) const override {
    block["sequence_parallel"] = spec.tp.sequence_parallel;
  }
  std::vector<SpecField> fields() const override {
    return {{.path = "strategy.tp.sequence_parallel",
             .section = "Strategy",
             .label = "Sequence parallel",
             .type = FieldType::kBoolean,
             .default_value = TensorParallelSpec{}.sequence_parallel,
             .help = "tp > 1: reduce-scatter and all-gather instead of all-reduce, LayerNorm and "
                     "dropout on sequence shards (model.context divisible by tp)"}};
  }

  // Runs for every spec: sequence_parallel asks for tp ranks even where the mesh has none.
  void check(const JobSpec& spec, StrategyCheck& check) const override {
    if (!check.ok_at("strategy.mesh.tp")) return;
    const int tp = spec.strategy.mesh.tp;
    if (spec.strategy.tp.sequence_parallel && tp == 1 &&
        check.ok_at("strategy.tp.sequence_parallel")) {
      check.report("strategy.tp.sequence_parallel",
                   "splits the sequence over the tensor-parallel ranks, so it needs "
                   "strategy.mesh.tp > 1 (this mesh's tp is 1); set it to false or raise tp");
    }
    if (tp == 1 || !check.ok_at("model.kind")) return;
    const std::string& kind = spec.model.kind;
    if (std::find(kTensorParallelModels.begin(), kTensorParallelModels.end(), kind) ==
        kTensorParallelModels.end()) {
      check.report("strategy.mesh.tp",
                   fmt::format("model.kind \"{}\" has no tensor parallelism (only gpt splits its "
                               "layers over tp ranks), got tp {}; set strategy.mesh.tp to 1",
                               kind, tp));
      return;
    }
    checkDivides(check, "model.heads", spec.model.heads, tp, "attention heads");
    checkDivides(check, "model.vocab_size", spec.model.vocab_size, tp,
                 "rows of the vocabulary-parallel embedding and head");
    if (spec.strategy.tp.sequence_parallel && check.ok_at("model.context") &&
        spec.model.context % tp != 0) {
      check.report("strategy.tp.sequence_parallel",
                   fmt::format("needs model.context ({}) divisible by strategy.mesh.tp ({}): each "
                               "tp rank holds context / tp positions",
                               spec.model.context, tp));
    }
  }

  std::vector<MemoryPart> estimateMemory(const MemoryInputs& inputs, int rank) const override {
    return meshMemory(inputs, rank);
  }

 private:
  // strategy.mesh.tp must divide the model's `field`: each tp rank holds `what` / tp of them.
  static void checkDivides(StrategyCheck& check, std::string_view field, int64_t value, int tp,
                           std::string_view what) {
    if (!check.ok_at(field) || value % tp == 0) return;
    check.report("strategy.mesh.tp",
                 fmt::format("must divide {} ({}): each tp rank holds 1 / tp of its {}, got tp {}",
                             field, value, what, tp));
  }
};

}  // namespace

const DimensionPlan& tensorParallelPlan() {
  static const TensorParallelPlan plan;
  return plan;
}

}  // namespace ringmaster
