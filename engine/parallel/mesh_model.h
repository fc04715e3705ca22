// This rank's model on the device mesh: the model as built, or with tp > 1 its tensor-parallel
// split (parallel/tensor_parallel/), with the loss over its output, which parameters every tp rank
// holds whole, and the gather of a split parameter back to its full value.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nn/layers.h"
#include "nn/loss.h"
#include "parallel/device_mesh.h"
#include "spec/job_spec.h"

namespace ringmaster {

struct MeshModel {
  Sequential* model = nullptr;        // what the strategy runs
  std::unique_ptr<Sequential> owned;  // the tp split; the built model's values then let go
  LossFactory make_loss;              // empty: softmax cross-entropy over whole logits
  // Whether every tp rank holds parameter `name` whole (LayerNorms, position rows, row-parallel
  // biases): one of them counts it in the gradient norm.
  std::function<bool(const std::string& name)> tp_whole;
  // The full value of parameter `name` from this rank's part (collective over tp; the value
  // itself when tp is 1).
  std::function<Tensor(const std::string& name, const Tensor& local)> gather_full;
};

// Collective over the mesh's tp group. `built` is the whole model as the spec builds it (with
// model.init_checkpoint's values, when given): with tp > 1 each rank takes its slice of it.
MeshModel makeMeshModel(Sequential& built, const JobSpec& spec, DeviceMesh& mesh);

}  // namespace ringmaster
