#!/usr/bin/python3
"""PyTorch reference for gpt_reference_test.cpp: the GPT-2 forward, loss, gradients and one AdamW
step for the weights and tokens the C++ test wrote, and a Hugging Face GPT-2 style state dict
("transformer." names, Conv1D layout, attn.bias / attn.masked_bias buffers, a tied lm_head.weight)
with random weights and its logits.

usage: gpt_reference.py INPUT.safetensors OUTPUT.safetensors HF.safetensors
INPUT holds the model's parameters by their GPT-2 names, "ids" and "targets" [B, T] int32, and the
metadata vocab_size, context, layers, heads, dim, lr, beta1, beta2, eps, weight_decay and, optionally,
precision ("fp32", the default, "bf16" or "fp16").
OUTPUT gets "logits", "loss" (a 1-element tensor), "grad.<name>" and "step.<name>" (after one
AdamW step), and "hf_logits" (the HF-layout model's logits for the same ids). Under bf16 / fp16 the
forward is the engine's autocast policy written out explicitly (gpt_forward's `lowp`: see rnd),
and for bf16 OUTPUT also gets "autocast_logits": the plain fp32 model under
torch.autocast("cpu", dtype=torch.bfloat16), the semantics the policy follows. Written for Debian's
python3-torch 1.13; safetensors is read and written by hand (the format is a length, a JSON
header and the raw little-endian bytes), as the safetensors package is not a dependency.
"""
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

DTYPES = {"F32": (torch.float32, 4), "I32": (torch.int32, 4)}
NAMES = {torch.float32: "F32", torch.int32: "I32"}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        dtype, _ = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype)
        tensors[name] = t.reshape(info["shape"]).clone()
    return tensors, meta


def save(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


LOWP = {"bf16": torch.bfloat16, "fp16": torch.float16}


def rnd(x, lowp):
    """x's values rounded through the 16-bit type `lowp`, as fp32 (x itself when lowp is None).
    Autograd rounds the gradient flowing back through it the same way (the backward of .to() is a
    cast of the gradient), so a product written rnd(rnd(a) @ rnd(b)) has autocast's forward and
    backward: 16-bit operands, exact products accumulated in fp32 (bf16 x bf16 and fp16 x fp16
    products fit fp32's 24-bit significand; CPU PyTorch 1.13 has no fp16 matmul, so this is also
    how the fp16 products are formed), a 16-bit output, and 16-bit gradients of the operands,
    each rounded once and then accumulated into the fp32 parameters' .grad."""
    return x if lowp is None else x.to(lowp).float()


class SoftmaxKeeping16(torch.autograd.Function):
    """softmax over the last axis in fp32 whose backward reads the probabilities rounded through
    `lowp` (the engine keeps them 16-bit under autocast)."""

    @staticmethod
    def forward(ctx, scores, lowp):
        probs = scores.softmax(dim=-1)
        ctx.save_for_backward(rnd(probs, lowp))
        return probs

    @staticmethod
    def backward(ctx, dprobs):
        (probs,) = ctx.saved_tensors
        return probs * (dprobs - (probs * dprobs).sum(dim=-1, keepdim=True)), None


def gpt_forward(p, ids, layers, heads, dim, lowp=None):
    """nanoGPT's forward over parameters in GPT-2's Conv1D layout (weights [in, out]). With `lowp`
    (torch.bfloat16 or torch.float16) it is the engine's autocast policy: every product's operands
    and output rounded through lowp (rnd), LayerNorm, softmax, residual stream and loss in fp32."""
    B, T = ids.shape
    D = dim // heads

    def r(x):
        return rnd(x, lowp)

    def linear(x, name):  # Conv1D: x W + b, the bias an operand of the product as in addmm
        return r(r(x) @ r(p[name + ".weight"]) + r(p[name + ".bias"]))

    x = p["wte.weight"][ids] + p["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(layers):
        h = f"h.{i}."
        a = F.layer_norm(x, (dim,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        qkv = linear(a, h + "attn.c_attn")
        q, k, v = qkv.split(dim, dim=2)
        q = q.view(B, T, heads, D).transpose(1, 2)
        k = k.view(B, T, heads, D).transpose(1, 2)
        v = v.view(B, T, heads, D).transpose(1, 2)
        att = r(r(q) @ r(k).transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~mask, float("-inf"))
        att = att.softmax(dim=-1) if lowp is None else SoftmaxKeeping16.apply(att, lowp)
        y = r(r(att) @ r(v)).transpose(1, 2).contiguous().view(B, T, dim)
        x = x + linear(y, h + "attn.c_proj")
        m = F.layer_norm(x, (dim,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(linear(m, h + "mlp.c_fc"), approximate="tanh")
        x = x + linear(m, h + "mlp.c_proj")
    x = F.layer_norm(x, (dim,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return r(r(x) @ r(p["wte.weight"]).t())


def main():
    inputs, meta = load(sys.argv[1])
    layers, heads, dim = int(meta["layers"]), int(meta["heads"]), int(meta["dim"])
    ids = inputs.pop("ids").long()
    targets = inputs.pop("targets").long()
    names = list(inputs.keys())
    precision = meta.get("precision", "fp32")
    lowp = LOWP.get(precision)
    params = {n: inputs[n].clone().requires_grad_(True) for n in names}
    logits = gpt_forward(params, ids, layers, heads, dim, lowp)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    loss.backward()
    out = {"logits": logits.detach(), "loss": loss.detach().reshape(1)}
    for n in names:
        out["grad." + n] = params[n].grad.detach().clone()
    optimizer = torch.optim.AdamW(
        list(params.values()), lr=float(meta["lr"]),
        betas=(float(meta["beta1"]), float(meta["beta2"])), eps=float(meta["eps"]),
        weight_decay=float(meta["weight_decay"]))
    optimizer.step()
    for n in names:
        out["step." + n] = params[n].detach().clone()

    # A Hugging Face GPT-2 state dict with random weights of the same shapes.
    torch.manual_seed(1234)
    hf = {}
    random = {n: torch.randn(inputs[n].shape) * 0.1 + (1.0 if "ln_" in n and n.endswith("weight")
                                                           else 0.0) for n in names}
    T = int(meta["context"])
    for n in names:
        hf["transformer." + n] = random[n]
    for i in range(layers):
        hf[f"transformer.h.{i}.attn.bias"] = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        hf[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    hf["lm_head.weight"] = random["wte.weight"]
    save(sys.argv[3], hf)
    with torch.no_grad():
        out["hf_logits"] = gpt_forward(random, ids, layers, heads, dim)
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                autocast = gpt_forward(inputs, ids, layers, heads, dim)
            out["autocast_logits"] = autocast.float()
    save(sys.argv[2], out)


if __name__ == "__main__":
    main()
