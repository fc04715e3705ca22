// The registration table of models: one line per model kind, and the lookups every caller (the spec
// parser, the trainer, the memory estimate) reaches a model through.
#include <fmt/format.h>

#include "core/error.h"
#include "nn/layers.h"
#include "nn/model.h"

namespace ringmaster {

// Each model's file defines its registration.
ModelDefinition mlpModel();          // nn/mlp.cpp
ModelDefinition residualMlpModel();  // nn/residual_mlp.cpp
ModelDefinition gptModel();          // nn/gpt.cpp

const std::vector<ModelDefinition>& modelDefinitions() {
  static const std::vector<ModelDefinition> table = {
      mlpModel(),
      residualMlpModel(),
      gptModel(),
  };
  return table;
}

// ---------------------------------------------------------------------------------------------

int64_t ModelDescription::parameterCount() const {
  int64_t total = 0;
  for (const ParameterInfo& p : parameters) total += shapeNumel(p.shape);
  return total;
}

const Shape& ModelDescription::inputShape() const {
  RM_ENFORCE(!blocks.empty(), "a model description without blocks");
  return blocks.front().input_shape;
}

const Shape& ModelDescription::outputShape() const {
  RM_ENFORCE(!blocks.empty(), "a model description without blocks");
  return blocks.back().output_shape;
}

std::vector<std::string_view> modelKinds() {
  std::vector<std::string_view> kinds;
  for (const ModelDefinition& definition : modelDefinitions()) kinds.push_back(definition.kind);
  return kinds;
}

const ModelDefinition* findModel(std::string_view kind) {
  for (const ModelDefinition& definition : modelDefinitions()) {
    if (definition.kind == kind) return &definition;
  }
  return nullptr;
}

namespace {

const ModelDefinition& definitionOf(const ModelSpec& spec) {
  const ModelDefinition* definition = findModel(spec.kind);
  if (definition == nullptr) {
    std::string kinds;
    for (std::string_view kind : modelKinds())
      kinds += fmt::format("{}\"{}\"", kinds.empty() ? "" : ", ", kind);
    RM_CHECK_ARG(false,
                 fmt::format("model.kind: expected one of {}, got \"{}\"", kinds, spec.kind));
  }
  return *definition;
}

}  // namespace

std::vector<ModelProblem> validateModel(const ModelSpec& spec) {
  return definitionOf(spec).validate(spec);
}

ModelDescription describeModel(const ModelSpec& spec, DType compute) {
  RM_CHECK_ARG(compute == DType::kF32 || compute == DType::kBF16 || compute == DType::kF16,
               fmt::format("describing a model for {}: only F32, BF16 and F16 are compute types",
                           dtypeName(compute)));
  const ModelDefinition& definition = definitionOf(spec);
  const std::vector<ModelProblem> problems = definition.validate(spec);
  RM_CHECK_ARG(problems.empty(), problems.empty() ? std::string()
                                                  : fmt::format("{}: {}", problems.front().path,
                                                                problems.front().message));
  return definition.describe(spec, compute);
}

ModelDescription describeModelShare(const ModelSpec& spec, DType compute,
                                    const TensorParallelShare& share) {
  if (share.ranks == 1) return describeModel(spec, compute);
  const ModelDefinition& definition = definitionOf(spec);
  RM_CHECK_ARG(definition.describe_share != nullptr,
               fmt::format("model {} has no tensor parallelism", spec.kind));
  describeModel(spec, compute);  // validates
  return definition.describe_share(spec, compute, share);
}

std::unique_ptr<Sequential> buildModel(const ModelSpec& spec, Device device) {
  const ModelDescription description = describeModel(spec);
  std::unique_ptr<Sequential> model = definitionOf(spec).build(spec, device);
  RM_ENFORCE(model->blocks() == description.blocks,
             fmt::format("model {}: the built blocks differ from the described ones", spec.kind));
  RM_ENFORCE(model->parameterCount() == description.parameterCount(),
             fmt::format("model {}: built with {} parameters, described with {}", spec.kind,
                         model->parameterCount(), description.parameterCount()));
  return model;
}

}  // namespace ringmaster
