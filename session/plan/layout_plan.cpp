// The enumeration of layout_plan.h: candidates over the world, each validated as the sweep member
// it would be, its memory estimated and compared with the device's.
#include "plan/layout_plan.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "core/number_format.h"
#include "run/run_session.h"
#include "spec/memory_estimate.h"
#include "tensor/device.h"

namespace ringmaster::plan {
namespace {

std::vector<MeshSpec> meshFactorisations(int world) {
  std::vector<MeshSpec> meshes;
  for (int dp = world; dp >= 1; --dp) {
    if (world % dp != 0) continue;
    for (int tp = world / dp; tp >= 1; --tp) {
      if ((world / dp) % tp != 0) continue;
      meshes.push_back({.dp = dp, .tp = tp, .pp = world / dp / tp});
    }
  }
  return meshes;
}

// The data-parallel choices over a mesh: DDP, then each FSDP sharding, where dp > 1.
std::vector<Layout> withDataParallel(Layout layout, const LayoutChoices& choices) {
  std::vector<Layout> out{layout};
  if (layout.mesh.dp == 1) return out;
  for (FsdpSharding sharding : choices.shardings) {
    layout.dp_kind = "fsdp";
    layout.sharding = sharding;
    out.push_back(layout);
  }
  return out;
}

// The pipeline choices: each schedule (interleaved with 2 chunks per rank) and micro-batch count.
std::vector<Layout> withPipeline(Layout layout, const LayoutChoices& choices) {
  if (layout.mesh.pp == 1) return {layout};
  std::vector<Layout> out;
  for (PipelineSchedule schedule : choices.schedules) {
    for (int factor : choices.micro_batch_factors) {
      layout.schedule = schedule;
      layout.virtual_stages = schedule == PipelineSchedule::kInterleaved1f1b ? 2 : 1;
      layout.micro_batches = factor * layout.mesh.pp;
      if (layout.batch_size % layout.micro_batches != 0) continue;
      out.push_back(layout);
    }
  }
  return out;
}

std::string memoryText(double bytes) {
  return formatBytes(bytes, kTerminalBytes);
}

// The most any rank's estimate needs, and that rank.
std::pair<double, int> peakEstimate(const JobSpec& spec) {
  std::pair<double, int> peak{0, 0};
  for (const RankMemoryEstimate& rank : estimateMemory(spec)) {
    if (rank.total() > peak.first) peak = {rank.total(), rank.rank};
  }
  return peak;
}

// {"strategy": the base's strategy in the mesh form} where the document has the legacy form.
SpecOverrides meshFormReset(const nlohmann::json& document, const JobSpec& base) {
  const auto strategy = document.find("strategy");
  if (strategy == document.end() || !strategy->is_object() || !strategy->contains("kind"))
    return {};
  return {{"strategy", toJson(base)["strategy"]}};
}

std::optional<double> hostMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::string Layout::dpMode() const {
  if (mesh.dp == 1) return "-";
  if (dp_kind != "fsdp" || !sharding) return dp_kind;
  return fmt::format("fsdp:{}", toString(*sharding));
}

std::string Layout::label() const {
  std::string text = fmt::format("dp{} tp{}{} pp{} {}", mesh.dp, mesh.tp,
                                 sequence_parallel ? "sp" : "", mesh.pp, dpMode());
  if (schedule) {
    text +=
        fmt::format(" {}{} m{}", toString(*schedule),
                    virtual_stages > 1 ? fmt::format("x{}", virtual_stages) : "", micro_batches);
  }
  return text + (checkpointing ? " ckpt " : " ") + std::string(toString(precision));
}

SpecOverrides layoutOverrides(const Layout& layout) {
  nlohmann::json dp = {{"kind", layout.dp_kind}};
  if (layout.sharding) dp["sharding"] = toString(*layout.sharding);
  nlohmann::json tp = nlohmann::json::object();
  if (layout.mesh.tp > 1) tp["sequence_parallel"] = layout.sequence_parallel;
  nlohmann::json pp = nlohmann::json::object();
  if (layout.schedule) {
    pp["schedule"] = toString(*layout.schedule);
    pp["virtual_stages"] = layout.virtual_stages;
  }
  return {{"strategy.mesh.dp", layout.mesh.dp},
          {"strategy.mesh.tp", layout.mesh.tp},
          {"strategy.mesh.pp", layout.mesh.pp},
          {"strategy.dp", dp},
          {"strategy.tp", tp},
          {"strategy.pp", pp},
          {"train.batch_size", layout.batch_size},
          {"train.micro_batches", layout.micro_batches},
          {"train.activation_checkpointing", layout.checkpointing},
          {"train.precision", toString(layout.precision)}};
}

std::vector<std::string> overrideAssignments(const SpecOverrides& overrides) {
  std::vector<std::string> out;
  for (const auto& [field, value] : overrides) out.push_back(field + "=" + value.dump());
  return out;
}

nlohmann::json overridesObject(const SpecOverrides& overrides) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [field, value] : overrides) object[field] = value;
  return object;
}

bool computesOnCuda(const JobSpec& spec) {
  if (spec.device == DeviceKind::kAuto) return cudaDeviceCount() > 0;
  return spec.device == DeviceKind::kCuda;
}

LayoutChoices defaultChoices(const JobSpec& spec) {
  LayoutChoices choices;
  choices.precisions = {Precision::kFp32, Precision::kBf16};
  if (computesOnCuda(spec)) choices.precisions.push_back(Precision::kFp16);
  choices.sequence_parallel = spec.strategy.tp.sequence_parallel;
  return choices;
}

std::vector<Layout> candidateLayouts(int world, int64_t global_batch,
                                     const LayoutChoices& choices) {
  std::vector<Layout> out;
  for (const MeshSpec& mesh : meshFactorisations(world)) {
    if (global_batch % mesh.dp != 0) continue;
    Layout base{.mesh = mesh,
                .batch_size = static_cast<int>(global_batch / mesh.dp),
                .sequence_parallel = mesh.tp > 1 && choices.sequence_parallel};
    for (const Layout& with_dp : withDataParallel(base, choices)) {
      for (const Layout& with_pp : withPipeline(with_dp, choices)) {
        for (bool checkpointing : {false, true}) {
          for (Precision precision : choices.precisions) {
            Layout layout = with_pp;
            layout.checkpointing = checkpointing;
            layout.precision = precision;
            out.push_back(layout);
          }
        }
      }
    }
  }
  return out;
}

std::vector<SpecProblem> validateWithOverrides(const nlohmann::json& base_document,
                                               const SpecOverrides& overrides) {
  nlohmann::json document = base_document;
  session::applyOverrides(document, overrideAssignments(overrides));
  return parseJobSpec(document).problems;
}

std::optional<std::pair<double, std::string>> deviceMemoryPerRank(const JobSpec& spec) {
  if (computesOnCuda(spec)) return std::nullopt;
  const std::optional<double> host = hostMemoryBytes();
  if (!host) return std::nullopt;
  int most = 1;
  for (int node = 0; node < nodeCount(spec); ++node) most = std::max(most, ranksOnNode(spec, node));
  return std::pair{*host / most,
                   fmt::format("host memory {} / {} rank(s)", memoryText(*host), most)};
}

LayoutEnumeration enumerateLayouts(const nlohmann::json& base_document,
                                   std::optional<double> device_memory,
                                   std::optional<LayoutChoices> choices) {
  SpecParseResult parsed = parseJobSpec(base_document);
  if (!parsed.ok()) RM_THROW(kSpec, parsed.describe());
  LayoutEnumeration out{.base = *parsed.spec};
  RM_CHECK_ARG(!out.base.program,
               "a program job's script builds a model the spec does not "
               "describe: the layout advisor plans engine jobs only");
  const TrainSpec& train = out.base.train;
  out.global_batch = train.batch_size * dataParallelSize(out.base);
  if (device_memory) {
    out.device_memory = device_memory;
    out.device_memory_source = "given";
  } else if (auto known = deviceMemoryPerRank(out.base)) {
    std::tie(out.device_memory, out.device_memory_source) = *known;
  }
  const LayoutChoices chosen = choices.value_or(defaultChoices(out.base));
  const SpecOverrides reset = meshFormReset(base_document, out.base);
  for (const Layout& layout : candidateLayouts(worldSize(out.base), out.global_batch, chosen)) {
    SpecOverrides overrides = reset;
    for (auto& field : layoutOverrides(layout)) overrides.push_back(std::move(field));
    nlohmann::json document = base_document;
    session::applyOverrides(document, overrideAssignments(overrides));
    SpecParseResult result = parseJobSpec(document);
    if (!result.ok()) {
      const SpecProblem& first = result.problems.front();
      out.refused.push_back(
          {layout, first.path.empty() ? first.message : first.path + ": " + first.message});
      continue;
    }
    PlannedLayout planned{
        .layout = layout, .overrides = std::move(overrides), .spec = std::move(*result.spec)};
    std::tie(planned.memory_bytes, planned.memory_rank) = peakEstimate(planned.spec);
    if (out.device_memory && planned.memory_bytes > *out.device_memory) {
      planned.dropped = fmt::format(
          "rank {} needs an estimated {}, more than the {} a rank has "
          "({})",
          planned.memory_rank, memoryText(planned.memory_bytes), memoryText(*out.device_memory),
          out.device_memory_source);
    }
    out.layouts.push_back(std::move(planned));
  }
  return out;
}

}  // namespace ringmaster::plan
