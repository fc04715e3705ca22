# The PyTorch anchor of bench/gpt_step_bench: loads the engine's GPT weights (Hugging Face GPT-2
# names and Conv1D layout, from safetensors) and tokens, times one fp32 training step (forward,
# cross-entropy over every token, backward, AdamW) per phase, and prints one JSON line.
import argparse
import json
import math
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"F32": np.float32, "I32": np.int32}


def load_safetensors(path):
    """Reads a safetensors file (only F32 and I32 tensors) into a dict of torch tensors."""
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    body = data[8 + header_len :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor {name}: dtype {info['dtype']} is not F32 or I32")
        begin, end = info["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(array.copy())
    return out


class Conv1D(torch.nn.Module):
    """GPT-2's linear layer: weight [in, out], y = x @ weight + bias."""

    def __init__(self, n_in, n_out, bias):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_in, n_out))
        self.bias = torch.nn.Parameter(torch.empty(n_out)) if bias else None

    def forward(self, x):
        y = x @ self.weight
        return y + self.bias if self.bias is not None else y


class Attention(torch.nn.Module):
    def __init__(self, dim, heads, bias):
        super().__init__()
        self.heads = heads
        self.c_attn = Conv1D(dim, 3 * dim, bias)
        self.c_proj = Conv1D(dim, dim, bias)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Mlp(torch.nn.Module):
    def __init__(self, dim, bias):
        super().__init__()
        self.c_fc = Conv1D(dim, 4 * dim, bias)
        self.c_proj = Conv1D(4 * dim, dim, bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    def __init__(self, dim, heads, bias):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(dim, elementwise_affine=True)
        self.attn = Attention(dim, heads, bias)
        self.ln_2 = torch.nn.LayerNorm(dim, elementwise_affine=True)
        self.mlp = Mlp(dim, bias)
        if not bias:
            self.ln_1.bias = None
            self.ln_2.bias = None

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt(torch.nn.Module):
    """GPT-2 (no dropout) with Hugging Face's parameter names; the LM head is tied to wte."""

    def __init__(self, vocab, context, layers, heads, dim, bias):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, dim)
        self.wpe = torch.nn.Embedding(context, dim)
        self.h = torch.nn.ModuleList(Block(dim, heads, bias) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(dim)
        if not bias:
            self.ln_f.bias = None

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1])
        x = self.wte(tokens) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.95)
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    weights = load_safetensors(args.weights)
    tokens = load_safetensors(args.tokens)
    inputs, targets = tokens["inputs"].long(), tokens["targets"].long()
    vocab, dim = weights["wte.weight"].shape
    context = weights["wpe.weight"].shape[0]
    bias = "ln_f.bias" in weights
    model = Gpt(vocab, context, args.layers, args.heads, dim, bias)
    model.load_state_dict(weights, strict=True)
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=args.lr,
        betas=(args.beta1, args.beta2),
        eps=args.eps,
        weight_decay=args.weight_decay,
    )
    phases = {}

    def step():
        t = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        logits = model(inputs)
        phases["forward"] += time.perf_counter() - t
        t = time.perf_counter()
        loss = F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
        phases["loss"] += time.perf_counter() - t
        t = time.perf_counter()
        loss.backward()  # the loss's own backward is inside, as autograd runs it
        phases["backward"] += time.perf_counter() - t
        t = time.perf_counter()
        optimizer.step()
        phases["optimizer"] += time.perf_counter() - t
        return loss.item()

    phases = dict.fromkeys(("forward", "loss", "backward", "optimizer"), 0.0)
    first_loss = step()
    step()
    best = None
    for _ in range(args.repeats):
        phases = dict.fromkeys(("forward", "loss", "backward", "optimizer"), 0.0)
        start = time.perf_counter()
        for _ in range(args.steps):
            last_loss = step()
        per_step = (time.perf_counter() - start) / args.steps
        if best is None or per_step < best["step"]:
            best = {"step": per_step, **{k: v / args.steps for k, v in phases.items()}}
    print(json.dumps({**best, "first_loss": first_loss, "last_loss": last_loss}), flush=True)


if __name__ == "__main__":
    main()
