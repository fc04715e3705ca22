#!/usr/bin/python3
"""For mesh_checkpoint_test.cpp: a consolidated checkpoint of a tensor- and pipeline-parallel GPT
run loads into a Hugging Face GPT-2 layout by name, and that model's logits in PyTorch are the
engine's.

usage: consolidated_gpt2.py CONSOLIDATED.safetensors ENGINE.safetensors LAYERS HEADS
CONSOLIDATED is the run's consolidated model.safetensors; ENGINE holds "ids" [B, T] and the
engine's "logits" [B, T, V] for them from the same file. The tensors are renamed as
GPT2LMHeadModel's state_dict names them ("transformer." prefix, a tied "lm_head.weight"), every
name and shape of that state dict for the config is required (Conv1D weights [in, out]), and the
logits are computed from the Hugging Face dict (gpt_reference.py's GPT-2 forward). Exits 1 saying
what differs.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nn"))
import gpt_reference  # noqa: E402  (tests/engine/nn: its safetensors reader and GPT-2 forward)


def gpt2_state_dict_shapes(vocab, context, layers, dim):
    """GPT2LMHeadModel's parameter names and shapes (its Conv1D layout), buffers left out."""
    shapes = {"transformer.wte.weight": (vocab, dim), "transformer.wpe.weight": (context, dim)}
    for i in range(layers):
        h = f"transformer.h.{i}."
        shapes.update({
            h + "ln_1.weight": (dim,), h + "ln_1.bias": (dim,),
            h + "attn.c_attn.weight": (dim, 3 * dim), h + "attn.c_attn.bias": (3 * dim,),
            h + "attn.c_proj.weight": (dim, dim), h + "attn.c_proj.bias": (dim,),
            h + "ln_2.weight": (dim,), h + "ln_2.bias": (dim,),
            h + "mlp.c_fc.weight": (dim, 4 * dim), h + "mlp.c_fc.bias": (4 * dim,),
            h + "mlp.c_proj.weight": (4 * dim, dim), h + "mlp.c_proj.bias": (dim,),
        })
    shapes.update({"transformer.ln_f.weight": (dim,), "transformer.ln_f.bias": (dim,),
                   "lm_head.weight": (vocab, dim)})
    return shapes


def main():
    consolidated, _ = gpt_reference.load(sys.argv[1])
    engine, _ = gpt_reference.load(sys.argv[2])
    layers, heads = int(sys.argv[3]), int(sys.argv[4])
    vocab, dim = consolidated["wte.weight"].shape
    context = consolidated["wpe.weight"].shape[0]

    hf = {"transformer." + name: value for name, value in consolidated.items()}
    hf["lm_head.weight"] = hf["transformer.wte.weight"]
    expected = gpt2_state_dict_shapes(vocab, context, layers, dim)
    problems = [f"missing {n}" for n in expected if n not in hf]
    problems += [f"unexpected {n}" for n in hf if n not in expected]
    problems += [f"{n}: shape {tuple(hf[n].shape)}, GPT-2 has {s}"
                 for n, s in expected.items() if n in hf and tuple(hf[n].shape) != s]
    if problems:
        print("\n".join(problems))
        return 1

    transformer = {n[len("transformer."):]: v for n, v in hf.items() if n.startswith("transformer.")}
    with torch.no_grad():
        logits = gpt_reference.gpt_forward(transformer, engine["ids"].long(), layers, heads, dim)
    difference = (logits - engine["logits"]).abs().max().item()
    print(f"max |PyTorch - engine| logit difference: {difference:.3g}")
    # float32 in another order of summation: ~1e-6 on logits of magnitude ~1; a transposed or
    # misplaced weight moves them by 1e-2 and more.
    return 0 if difference < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
