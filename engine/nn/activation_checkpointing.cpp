// Activation checkpointing over a Sequential's blocks (nn/layers.h): each block's forward keeps
// its input and its Dropouts' mask counters only, and its backward re-runs the block's forward
// before running the children's backwards, as torch.utils.checkpoint does per transformer block.
#include "core/error.h"
#include "nn/layers.h"

namespace ringmaster {

void Sequential::setActivationCheckpointing(bool on) {
  RM_CHECK_ARG(!on || !blocks_.empty(), "activation checkpointing needs the model's blocks");
  checkpointing_ = on;
  checkpoints_.assign(blocks_.size(), {});
}

std::vector<Dropout*> Sequential::dropouts(size_t block) {
  std::vector<Dropout*> found;
  for (size_t m = blocks_[block].first_child; m < blocks_[block].end_child; ++m) {
    forEachModule(*children_[m], [&](Module& module) {
      if (auto* dropout = dynamic_cast<Dropout*>(&module)) found.push_back(dropout);
    });
  }
  return found;
}

void Sequential::dropContexts(size_t first, size_t end) {
  for (size_t m = first; m < end; ++m)
    children_[m]->restoreContext(std::vector<Tensor>(children_[m]->saveContext().size()));
}

Tensor Sequential::forwardChild(size_t m, const Tensor& input) {
  if (!checkpointing_ || !training_) return children_.at(m)->forward(input);
  const size_t b = block_of_child_.at(m);
  const ModelBlock& block = blocks_[b];
  if (m == block.first_child) {
    BlockCheckpoint& checkpoint = checkpoints_[b];
    checkpoint.input = input;
    checkpoint.dropout_calls.clear();
    for (Dropout* dropout : dropouts(b)) checkpoint.dropout_calls.push_back(dropout->calls());
  }
  Tensor output = children_[m]->forward(input);
  if (m + 1 == block.end_child) dropContexts(block.first_child, block.end_child);
  return output;
}

// The block's forward again from its kept input, each Dropout drawing the masks of its first
// forward; the counters then go back to where the later forwards (micro-batches) left them.
void Sequential::recompute(size_t b) {
  BlockCheckpoint& checkpoint = checkpoints_[b];
  const std::vector<Dropout*> found = dropouts(b);
  RM_ENFORCE(found.size() == checkpoint.dropout_calls.size(),
             "a checkpointed block's Dropouts changed between its forward and its backward");
  std::vector<uint64_t> now;
  for (size_t i = 0; i < found.size(); ++i) {
    now.push_back(found[i]->calls());
    found[i]->setCalls(checkpoint.dropout_calls[i]);
  }
  Tensor x = checkpoint.input;
  for (size_t m = blocks_[b].first_child; m < blocks_[b].end_child; ++m)
    x = children_[m]->forward(x);
  for (size_t i = 0; i < found.size(); ++i) found[i]->setCalls(now[i]);
  checkpoint = {};
}

Tensor Sequential::backwardChild(size_t m, const Tensor& grad_output, bool keep_for_weights) {
  if (!checkpointing_) {
    return keep_for_weights ? children_.at(m)->backwardInput(grad_output)
                            : children_.at(m)->backward(grad_output);
  }
  const size_t b = block_of_child_.at(m);
  const ModelBlock& block = blocks_[b];
  if (m + 1 == block.end_child && checkpoints_[b].input.defined()) recompute(b);
  Tensor grad = keep_for_weights ? children_[m]->backwardInput(grad_output)
                                 : children_[m]->backward(grad_output);
  // The block is done: its recomputed activations go (backwardWeights still needs them).
  if (m == block.first_child && !keep_for_weights) dropContexts(block.first_child, block.end_child);
  return grad;
}

Tensor Sequential::backwardChild(size_t m, const Tensor& grad_output) {
  return backwardChild(m, grad_output, false);
}

Tensor Sequential::backwardInputChild(size_t m, const Tensor& grad_output) {
  return backwardChild(m, grad_output, true);
}

ChildrenContext Sequential::saveChildContexts(size_t first, size_t end) const {
  ChildrenContext context;
  for (size_t m = first; m < end; ++m) context.children.push_back(children_.at(m)->saveContext());
  if (checkpointing_) {
    RM_ENFORCE(first < end && blocks_.at(block_of_child_.at(first)).first_child == first &&
                   blocks_[block_of_child_.at(end - 1)].end_child == end,
               "checkpointed contexts are saved for whole blocks");
    for (size_t b = block_of_child_[first]; b <= block_of_child_[end - 1]; ++b)
      context.checkpoints.push_back(checkpoints_[b]);
  }
  return context;
}

void Sequential::restoreChildContexts(size_t first, const ChildrenContext& context) {
  for (size_t i = 0; i < context.children.size(); ++i)
    children_.at(first + i)->restoreContext(context.children[i]);
  if (!context.checkpoints.empty()) {
    const size_t b0 = block_of_child_.at(first);
    for (size_t i = 0; i < context.checkpoints.size(); ++i)
      checkpoints_.at(b0 + i) = context.checkpoints[i];
  }
}

}  // namespace ringmaster
