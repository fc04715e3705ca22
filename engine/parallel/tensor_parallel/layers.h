// The tensor-parallel layers of the GPT, Megatron-LM style (Shoeybi et al. 2019; layers.py): each
// holds its rank's slice of a plain layer's weights and reaches the other ranks only through the
// region mappings (mappings.h). Column-parallel Conv1D (output features split: c_attn, c_fc),
// row-parallel Conv1D (input features split: attn.c_proj, mlp.c_proj), the vocabulary-parallel
// embedding and LM head (wte's rows split), and the attention and MLP built from them. With
// `sequence_parallel` (Korthikanti et al. 2022) the activations between them are sequence shards
// [B, T/tp, C]: the column-parallel layers all-gather their input and the row-parallel ones
// reduce-scatter their output; without it they are whole [B, T, C] on every rank. Parameters are
// named as the plain modules' (nn/attention.h, nn/embedding.h), each holding the local slice.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "nn/attention.h"

namespace ringmaster {

// The tensor-parallel group and whether the activations between the layers are sequence shards.
struct TensorParallelGroup {
  Communicator* comm = nullptr;
  bool sequence_parallel = false;
};

// Conv1D [in, out / tp]: y_local = x W_local (+ b_local). Its input enters the tensor-parallel
// region (copy, or all-gather of the sequence shards); its output is the rank's columns.
class ColumnParallelConv1D : public Module {
 public:
  ColumnParallelConv1D(int64_t in_features, int64_t local_out_features, bool bias,
                       TensorParallelGroup group, Device device = Device::cpu());
  std::string typeName() const override { return "ColumnParallelConv1D"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return conv_.saveContext(); }
  void restoreContext(const std::vector<Tensor>& context) override {
    conv_.restoreContext(context);
  }
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override {
    conv_.collectParameters(prefix, out);
  }
  void forEachChild(const std::function<void(Module&)>& visit) override { visit(conv_); }

 private:
  TensorParallelGroup group_;
  Conv1D conv_;
};

// Conv1D [in / tp, out]: the rank's partial product x_local W_local, summed over the ranks
// (all-reduce, or reduce-scatter into sequence shards), then the bias, added once. The bias is
// replicated; under sequence parallelism its gradient is the rank's tokens' share
// (reduceSequenceParallelGradients in tp_gpt.h sums it). Under autocast the partial products are
// summed in fp32 and the sum with the bias rounded through the 16-bit format once, as one
// process's product is (Megatron sums 16-bit partials).
class RowParallelConv1D : public Module {
 public:
  RowParallelConv1D(int64_t local_in_features, int64_t out_features, bool bias,
                    TensorParallelGroup group, Device device = Device::cpu());
  std::string typeName() const override { return "RowParallelConv1D"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return conv_.saveContext(); }
  void restoreContext(const std::vector<Tensor>& context) override {
    conv_.restoreContext(context);
  }
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override { visit(conv_); }

 private:
  TensorParallelGroup group_;
  Conv1D conv_;     // without bias
  Parameter bias_;  // [out]; undefined without bias
};

// GPT-2's attention on the rank's heads: c_attn column-parallel with the q, k and v columns of
// each of its heads, AttentionCore on them with the rank's own attention-dropout stream, c_proj
// row-parallel, and the residual dropout after the sum.
class TensorParallelAttention : public Module {
 public:
  struct Options {
    int64_t dim = 0;
    int64_t local_heads = 0;  // heads / tp
    int64_t head_dim = 0;
    float dropout = 0.0f;
    bool bias = true;
    uint64_t attention_dropout_seed = 0;  // different on each tensor-parallel rank
    uint64_t residual_dropout_seed = 0;   // equal on the ranks (unless the input is sharded)
  };
  TensorParallelAttention(const Options& options, TensorParallelGroup group,
                          Device device = Device::cpu());
  std::string typeName() const override { return "TensorParallelAttention"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override { return childContexts(children()); }
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override;
  void setTraining(bool training) override;

 private:
  std::vector<Module*> children() const;

  ColumnParallelConv1D c_attn_;
  AttentionCore core_;
  RowParallelConv1D c_proj_;
  Dropout resid_dropout_;
};

// GPT-2's MLP on the rank's hidden columns: c_fc column-parallel, tanh GELU, c_proj
// row-parallel, dropout after the sum.
class TensorParallelMlp : public Module {
 public:
  struct Options {
    int64_t dim = 0;
    int64_t local_hidden = 0;  // 4 dim / tp
    float dropout = 0.0f;
    bool bias = true;
    uint64_t dropout_seed = 0;
  };
  TensorParallelMlp(const Options& options, TensorParallelGroup group,
                    Device device = Device::cpu());
  std::string typeName() const override { return "TensorParallelMLP"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override;
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override;
  void setTraining(bool training) override;

 private:
  std::vector<Module*> children() const;

  ColumnParallelConv1D c_fc_;
  RowParallelConv1D c_proj_;
  Dropout dropout_;
  Tensor gelu_input_;  // [B, T, local hidden] (16-bit under autocast)
};

// ids [B, T] int32 (the whole batch on every rank) -> [B, T, C], or the rank's sequence shard
// [B, T/tp, C]. "wte.weight" holds the rank's vocabulary rows [start, start + V/tp): ids outside
// them look up a zero row, and the ranks' lookups are summed (all-reduce, or reduce-scatter into
// sequence shards); then the position rows of the tokens held ("wpe.weight", replicated) and the
// dropout.
class VocabParallelEmbedding : public Module {
 public:
  struct Options {
    int64_t local_vocab = 0;  // V / tp
    int64_t vocab_start = 0;  // rank * V / tp
    int64_t context = 0;
    int64_t dim = 0;
    float dropout = 0.0f;
    uint64_t dropout_seed = 0;
  };
  VocabParallelEmbedding(const Options& options, TensorParallelGroup group,
                         Device device = Device::cpu());
  std::string typeName() const override { return "VocabParallelEmbedding"; }
  Tensor forward(const Tensor& input) override;
  // Adds into wte.grad and wpe.grad; the ids have no gradient (an undefined tensor comes back).
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override;
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override { visit(dropout_); }
  void setTraining(bool training) override;

  Parameter& tokenEmbedding() { return wte_; }

 private:
  // The rows of wpe (or of its gradient) for the tokens [0, tokens) this rank holds.
  Tensor positionRows(Tensor& table, int64_t tokens) const;

  TensorParallelGroup group_;
  int64_t vocab_start_;
  Parameter wte_;  // [V / tp, C]
  Parameter wpe_;  // [context, C]
  Dropout dropout_;
  Tensor local_ids_;  // [B, T]: id - vocab_start, or V / tp (the zero row) outside the rank's rows
};

// [B, T, C] (or the rank's sequence shard) -> the rank's logits [B, T, V/tp]: ln_f (replicated),
// into the tensor-parallel region (copy, or all-gather), then x wte_local^T through the
// embedding's local rows (tied, as LmHead). The loss on these logits is
// VocabParallelCrossEntropy (vocab_parallel_cross_entropy.h).
class VocabParallelLmHead : public Module {
 public:
  VocabParallelLmHead(int64_t dim, bool bias, Parameter* tied, TensorParallelGroup group,
                      Device device = Device::cpu());
  std::string typeName() const override { return "VocabParallelLmHead"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override;
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override { visit(ln_f_); }
  void setTraining(bool training) override;

  Parameter* tiedWeight() const { return tied_; }
  void setTiedWeight(Parameter* tied) { tied_ = tied; }

 private:
  TensorParallelGroup group_;
  TokenLayerNorm ln_f_;
  Parameter* tied_;
  Tensor normed_;  // [B, T, C], ln_f's output gathered (16-bit under autocast)
};

}  // namespace ringmaster
