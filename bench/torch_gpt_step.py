# The PyTorch anchor of bench/gpt_step_bench: loads the engine's GPT weights (Hugging Face GPT-2
# names and Conv1D layout, from safetensors) and tokens, times one training step (forward,
# cross-entropy over every token, backward, AdamW) per phase, in fp32 or, with --precision bf16,
# with the forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16) as nanoGPT runs
# it, and prints one JSON line. The model is the GPT tests' PyTorch reference,
# tests/engine/nn/gpt_reference.py (nanoGPT's forward).
import argparse
import contextlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "engine", "nn"))
from gpt_reference import gpt_forward, load  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
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

    weights, _ = load(args.weights)
    tokens, _ = load(args.tokens)
    inputs, targets = tokens["inputs"].long(), tokens["targets"].long()
    vocab, dim = weights["wte.weight"].shape
    params = {name: value.requires_grad_(True) for name, value in weights.items()}
    optimizer = torch.optim.AdamW(
        list(params.values()),
        lr=args.lr,
        betas=(args.beta1, args.beta2),
        eps=args.eps,
        weight_decay=args.weight_decay,
    )

    def autocast():
        if args.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step():
        t = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        with autocast():
            logits = gpt_forward(params, inputs, args.layers, args.heads, dim)
        phases["forward"] += time.perf_counter() - t
        t = time.perf_counter()
        with autocast():
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
