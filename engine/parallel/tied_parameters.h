// The parameters of parts of a model as the strategies that split it see them: named as the whole
// model's state_dict (whatever the children's own prefixes), each once, and the tied parameters its
// blocks declare (ModelBlock::tied_parameters: the GPT's LM head reading the token embedding)
// resolved to the Parameter their owner holds.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "nn/layers.h"

namespace ringmaster {

class ModelParameters {
 public:
  // Reads the names and the ties; build it before a strategy releases any storage. Throws
  // kInvalidArgument when a block ties a parameter the model does not have, or one the block
  // holds itself.
  explicit ModelParameters(Sequential& model);

  // Every parameter of the model, in namedParameters() order.
  const std::vector<NamedParameter>& all() const { return all_; }
  // The parameters children [first, end) hold, in the model's order, each once.
  std::vector<NamedParameter> held(size_t first, size_t end) const;
  // The parameters the blocks within children [first, end) read but do not hold (their ties to
  // blocks outside the range), in the model's order.
  std::vector<NamedParameter> tiedInto(size_t first, size_t end) const;
  // The block (index into model.blocks()) that holds `parameter`.
  size_t ownerBlock(const Parameter* parameter) const;
  // Whether any block declares a tie.
  bool hasTies() const { return has_ties_; }

 private:
  Sequential& model_;
  std::vector<NamedParameter> all_;
  std::unordered_map<const Parameter*, size_t> index_;  // position in all_
  std::vector<size_t> owner_;                           // per parameter of all_: its block
  bool has_ties_ = false;
};

}  // namespace ringmaster
