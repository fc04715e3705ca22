// The two ends of the GPT that share the token embedding: GptEmbedding (token ids to wte rows
// plus the learned position rows wpe, then dropout) and LmHead (ln_f, then logits = x wte^T
// through the same Parameter: the weight tie of GPT-2, whose backward adds into wte.grad).
#pragma once

#include <cstdint>
#include <vector>

#include "nn/attention.h"

namespace ringmaster {

// ids [B, T] int32 (T <= context) -> [B, T, C]. Its parameters are "wte.weight" [V, C] and
// "wpe.weight" [context, C]; `vocab` is the rows held here (all of them, or a vocabulary-parallel
// rank's).
class GptEmbedding : public Module {
 public:
  struct Options {
    int64_t vocab = 0;
    int64_t context = 0;
    int64_t dim = 0;
    float dropout = 0.0f;
    GptInit token_init;     // wte
    GptInit position_init;  // wpe
    uint64_t dropout_seed = 0;
  };
  GptEmbedding(const Options& options, Device device = Device::cpu());
  std::string typeName() const override { return "Embedding"; }
  Tensor forward(const Tensor& input) override;
  // Adds into wte.grad and wpe.grad; the ids have no gradient (an undefined tensor comes back).
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override;
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override;
  void setTraining(bool training) override;

  Parameter& tokenEmbedding() { return wte_; }

 private:
  Parameter wte_;  // [V, C]
  Parameter wpe_;  // [context, C]
  Dropout dropout_;
  Tensor ids_;  // [B, T]
};

// The LM head's product, logits [..., V] = x wte^T, for `normed` [..., C] (16-bit under autocast:
// an autocastOperand) and wte [V, C]; the logits rounded as autocast leaves them. Shared with the
// vocabulary-parallel head, whose wte is a rank's rows.
Tensor tiedLogitsForward(const Tensor& normed, const Tensor& wte, DType compute);
// Its backward: wte.grad += dlogits^T x; returns dx = dlogits wte, in `normed`'s shape.
Tensor tiedLogitsBackward(const Tensor& normed, const Tensor& grad_logits, Parameter& wte,
                          DType compute);

// [B, T, C] -> logits [B, T, V]: ln_f, then x wte^T with `tied` (the embedding's wte, declared
// there: namedParameters() lists it once, as "wte.weight"). Its own parameters are ln_f's.
class LmHead : public Module {
 public:
  LmHead(int64_t dim, bool bias, Parameter* tied, Device device = Device::cpu());
  std::string typeName() const override { return "LmHead"; }
  Tensor forward(const Tensor& input) override;
  Tensor backward(const Tensor& grad_output) override;
  std::vector<Tensor> saveContext() const override;
  void restoreContext(const std::vector<Tensor>& context) override;
  void collectParameters(const std::string& prefix, std::vector<NamedParameter>& out) override;
  void forEachChild(const std::function<void(Module&)>& visit) override;
  void setTraining(bool training) override;

  // The tied weight (a pipeline stage or FSDP unit holding the head may point it elsewhere).
  Parameter* tiedWeight() const { return tied_; }
  void setTiedWeight(Parameter* tied) { tied_ = tied; }

 private:
  TokenLayerNorm ln_f_;
  Parameter* tied_;
  Tensor normed_;  // [B, T, C], ln_f's output (16-bit under autocast)
};

}  // namespace ringmaster
