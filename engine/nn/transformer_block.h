// The GPT's transformer block: its MLP (c_fc, tanh GELU, c_proj, dropout) and the pre-LayerNorm
// block around attention and MLP (x + attn(ln_1(x)), then h + mlp(ln_2(h))), Hugging Face GPT-2's
// parameter names ("ln_1.weight", "attn.c_attn.weight", "mlp.c_fc.weight", ...).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/attention.h"

namespace ringmaster {

// c_fc: dim -> hidden, tanh GELU, c_proj: hidden -> dim, dropout. `hidden` is the width computed
// here (4 dim, or a tensor-parallel rank's share of it).
class GptMlp : public Module {
 public:
  struct Options {
    int64_t dim = 0;
    int64_t hidden = 0;
    float dropout = 0.0f;
    bool bias = true;
    GptInit init;       // c_fc's weights
    GptInit proj_init;  // c_proj's weights
    uint64_t dropout_seed = 0;
  };
  GptMlp(const Options& options, Device device = Device::cpu());
  std::string typeName() const override { return "MLP"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override;
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override;
  void setTraining(bool training) override;

 private:
  std::vector<Module*> children() const;

  Conv1D c_fc_, c_proj_;
  Dropout dropout_;
  Tensor gelu_input_;  // [B, T, hidden] (16-bit under autocast)
};

struct TransformerBlockOptions {
  int64_t dim = 0;
  int64_t heads = 0;  // computed here
  int64_t head_dim = 0;
  int64_t hidden = 0;  // the MLP's width computed here
  float dropout = 0.0f;
  bool bias = true;
  GptInit init;       // c_attn, c_fc
  GptInit proj_init;  // attn.c_proj, mlp.c_proj
  uint64_t dropout_seed = 0;
};

// x + attn(ln_1(x)), then h + mlp(ln_2(h)). Its attention and MLP are CausalSelfAttention and
// GptMlp, or any modules with their names' parameters ("attn.", "mlp."), e.g. a tensor-parallel
// rank's (parallel/tensor_parallel/).
class TransformerBlock : public Module {
 public:
  TransformerBlock(const TransformerBlockOptions& options, Device device = Device::cpu());
  TransformerBlock(int64_t dim, bool bias, std::unique_ptr<Module> attention,
                   std::unique_ptr<Module> mlp, Device device = Device::cpu());
  std::string typeName() const override { return "Block"; }
  Tensor forward(const Tensor& input) override;  // [B, T, C] -> [B, T, C]
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return childContexts(children()); }
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override;
  void setTraining(bool training) override;

 private:
  std::vector<Module*> children() const;

  TokenLayerNorm ln_1_;
  std::unique_ptr<Module> attn_;
  TokenLayerNorm ln_2_;
  std::unique_ptr<Module> mlp_;
};

}  // namespace ringmaster
