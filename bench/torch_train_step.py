# The PyTorch anchor of bench/train_step_bench: times one training step (forward, cross-entropy,
# backward, AdamW) of the same MLP, single-threaded, and prints one JSON line per batch size.
import json
import sys
import time

import torch


def main():
    layers = [int(x) for x in sys.argv[1].split(",")]
    batch_sizes = [int(x) for x in sys.argv[2].split(",")]
    seconds = float(sys.argv[3])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    modules = []
    for i in range(len(layers) - 1):
        modules.append(torch.nn.Linear(layers[i], layers[i + 1]))
        if i + 2 < len(layers):
            modules.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*modules)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    for batch in batch_sizes:
        x = torch.randn(batch, layers[0])
        y = torch.randint(0, layers[-1], (batch,))

        def step():
            optimizer.zero_grad(set_to_none=False)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()

        for _ in range(5):
            step()
        steps = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            step()
            steps += 1
        elapsed = time.perf_counter() - start
        print(json.dumps({"batch": batch, "steps": steps, "seconds": elapsed}), flush=True)


if __name__ == "__main__":
    main()
