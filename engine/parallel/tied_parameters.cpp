// Whole-model names by Parameter identity, and the blocks' ties resolved by name.
#include "parallel/tied_parameters.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

ModelParameters::ModelParameters(Sequential& model) : model_(model), all_(model.namedParameters()) {
  for (size_t i = 0; i < all_.size(); ++i) index_.emplace(all_[i].parameter, i);
  owner_.assign(all_.size(), 0);
  const std::vector<ModelBlock>& blocks = model_.blocks();
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (const NamedParameter& p : held(blocks[b].first_child, blocks[b].end_child))
      owner_[index_.at(p.parameter)] = b;
  }
  for (size_t b = 0; b < blocks.size(); ++b) {
    for (const std::string& name : blocks[b].tied_parameters) {
      has_ties_ = true;
      const auto it = std::find_if(all_.begin(), all_.end(),
                                   [&](const NamedParameter& p) { return p.name == name; });
      RM_CHECK_ARG(it != all_.end(), fmt::format("block {} ties parameter {}, which the model "
                                                 "does not have",
                                                 blocks[b].name, name));
      RM_CHECK_ARG(
          owner_[static_cast<size_t>(it - all_.begin())] != b,
          fmt::format("block {} ties parameter {}, which it holds itself", blocks[b].name, name));
    }
  }
}

std::vector<NamedParameter> ModelParameters::held(size_t first, size_t end) const {
  std::vector<NamedParameter> local;
  for (size_t m = first; m < end; ++m) model_.child(m).collectParameters("", local);
  std::vector<size_t> positions;
  for (const NamedParameter& p : local) {
    const auto it = index_.find(p.parameter);
    RM_ENFORCE(
        it != index_.end(),
        fmt::format("child {} holds parameter {} that the model does not list", first, p.name));
    positions.push_back(it->second);
  }
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  std::vector<NamedParameter> out;
  for (size_t i : positions) out.push_back(all_[i]);
  return out;
}

std::vector<NamedParameter> ModelParameters::tiedInto(size_t first, size_t end) const {
  std::vector<size_t> positions;
  for (const ModelBlock& block : model_.blocks()) {
    if (block.first_child < first || block.first_child >= end) continue;
    for (const std::string& name : block.tied_parameters) {
      for (size_t i = 0; i < all_.size(); ++i) {
        const ModelBlock& owner = model_.blocks()[owner_[i]];
        if (all_[i].name == name && (owner.first_child < first || owner.first_child >= end))
          positions.push_back(i);
      }
    }
  }
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  std::vector<NamedParameter> out;
  for (size_t i : positions) out.push_back(all_[i]);
  return out;
}

size_t ModelParameters::ownerBlock(const Parameter* parameter) const {
  const auto it = index_.find(parameter);
  RM_ENFORCE(it != index_.end(), "a parameter the model does not list");
  return owner_[it->second];
}

}  // namespace ringmaster
