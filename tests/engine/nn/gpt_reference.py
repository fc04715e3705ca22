#!/usr/bin/python3
"""PyTorch reference for gpt_reference_test.cpp: the GPT-2 forward, loss, gradients and one AdamW
step for the weights and tokens the C++ test wrote, and a Hugging Face GPT-2 style state dict
("transformer." names, Conv1D layout, attn.bias / attn.masked_bias buffers, a tied lm_head.weight)
with random weights and its logits.

usage: gpt_reference.py INPUT.safetensors OUTPUT.safetensors HF.safetensors
INPUT holds the model's parameters by their GPT-2 names, "ids" and "targets" [B, T] int32, and the
metadata vocab_size, context, layers, heads, dim, lr, beta1, beta2, eps, weight_decay.
OUTPUT gets "logits", "loss" (a 1-element tensor), "grad.<name>" and "step.<name>" (after one
AdamW step), and "hf_logits" (the HF-layout model's logits for the same ids). Written for Debian's
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


def gpt_forward(p, ids, layers, heads, dim):
    """nanoGPT's forward over parameters in GPT-2's Conv1D layout (weights [in, out])."""
    B, T = ids.shape
    D = dim // heads
    x = p["wte.weight"][ids] + p["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(layers):
        h = f"h.{i}."
        a = F.layer_norm(x, (dim,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(dim, dim=2)
        q = q.view(B, T, heads, D).transpose(1, 2)
        k = k.view(B, T, heads, D).transpose(1, 2)
        v = v.view(B, T, heads, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, dim)
        x = x + (y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (dim,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + (m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (dim,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return x @ p["wte.weight"].t()


def main():
    inputs, meta = load(sys.argv[1])
    layers, heads, dim = int(meta["layers"]), int(meta["heads"]), int(meta["dim"])
    ids = inputs.pop("ids").long()
    targets = inputs.pop("targets").long()
    names = list(inputs.keys())
    params = {n: inputs[n].clone().requires_grad_(True) for n in names}
    logits = gpt_forward(params, ids, layers, heads, dim)
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
    save(sys.argv[2], out)


if __name__ == "__main__":
    main()
