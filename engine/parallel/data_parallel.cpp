// The data-parallel runtimes by name (parallel/data_parallel.h), and the flat shards' slices.
#include "parallel/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace ringmaster {

const DataParallelRuntime& ddpRuntime();
const DataParallelRuntime& fsdpRuntime();

const DataParallelRuntime& dataParallelRuntime(std::string_view name) {
  static const DataParallelRuntime* const kRuntimes[] = {&ddpRuntime(), &fsdpRuntime()};
  for (const DataParallelRuntime* runtime : kRuntimes)
    if (runtime->name == name) return *runtime;
  RM_THROW(
      kInvalidArgument,
      fmt::format("strategy.dp.kind: '{}' has no runtime in parallel/data_parallel.cpp", name));
}

std::vector<Tensor> flatShardSlices(const std::vector<std::pair<std::string, int64_t>>& layout,
                                    const Tensor& shard, int64_t start,
                                    const std::function<bool(const std::string&)>& wanted) {
  std::vector<Tensor> out;
  const int64_t end = start + shard.numel();
  int64_t offset = 0;
  for (const auto& [name, numel] : layout) {
    const int64_t first = std::max(offset, start), last = std::min(offset + numel, end);
    if (first < last && wanted(name)) out.push_back(shard.narrowRows(first - start, last - first));
    offset += numel;
  }
  return out;
}

}  // namespace ringmaster
