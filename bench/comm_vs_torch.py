# Runs `ringmaster-node bench-comm --backend gloo` and torch.distributed's Gloo (torch_collectives.py)
# on the same op, sizes, world sizes and iteration counts (at least -n, more for small sizes so that
# each measurement lasts about 100 ms), alternating them for a few rounds (best round per size on
# each side, as these machines are noisy), and prints one table per world size with the bus
# bandwidth of each and their ratio (ours / PyTorch's: above 1 is faster).
import argparse
import json
import os
import re
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def bus_factor(op, n):
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def iters_for(size, args):
    return max(args.n, (16 << 20) // size)


def ours(node, op, ranks, sizes, args):
    times = {}
    for size in sizes:
        cmd = [node, "bench-comm", "--ranks", str(ranks), "--op", op, "-b", str(size), "-e",
               str(size), "-n", str(iters_for(size, args)), "-w", str(args.w), "--check"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        times.update(table_times(out))
    return times


def table_times(out):
    times = {}
    for line in out.splitlines():
        cols = line.split()
        if line.startswith("#") or len(cols) < 10:
            continue
        if cols[8] != "0":
            sys.exit(f"bench-comm reported {cols[8]} wrong elements at {cols[0]} bytes")
        times[int(cols[0])] = float(cols[5])
    return times


def torch_times(op, ranks, sizes, args):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_collectives.py"), "--ranks", str(ranks),
           "--port", str(free_port()), "--ops", op, "--sizes", ",".join(map(str, sizes)),
           "--iters", ",".join(str(iters_for(s, args)) for s in sizes), "--warmup", str(args.w)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return {j["bytes"]: j["us"] for j in map(json.loads, out.splitlines()) if j["us"] is not None}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node", required=True, help="path of ringmaster-node")
    parser.add_argument("--op", default="all_reduce")
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("-b", default="64K")
    parser.add_argument("-e", default="64M")
    parser.add_argument("-f", type=int, default=4)
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("-w", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    sizes, s = [], parse_size(args.b)
    while s <= parse_size(args.e):
        sizes.append(s)
        s *= args.f
    for ranks in map(int, args.ranks.split(",")):
        best_ours, best_torch = {}, {}
        for _ in range(args.rounds):
            for size, us in ours(args.node, args.op, ranks, sizes, args).items():
                best_ours[size] = min(us, best_ours.get(size, us))
            for size, us in torch_times(args.op, ranks, sizes, args).items():
                best_torch[size] = min(us, best_torch.get(size, us))
        print(f"\n{args.op}, Gloo over loopback TCP, {ranks} ranks, float32 sum, "
              f"-n {args.n}+ -w {args.w}, best of {args.rounds} alternating rounds")
        print(f"{'bytes':>10} {'ours us':>10} {'ours busbw':>11} {'torch us':>10} "
              f"{'torch busbw':>12} {'ratio':>6}")
        factor = bus_factor(args.op, ranks)
        for size in sorted(best_ours):
            o = best_ours[size]
            t = best_torch.get(size)
            ob = size / (o * 1e3) * factor
            if t is None:
                print(f"{size:>10} {o:>10.0f} {ob:>11.3f} {'-':>10} {'-':>12} {'-':>6}")
                continue
            tb = size / (t * 1e3) * factor
            print(f"{size:>10} {o:>10.0f} {ob:>11.3f} {t:>10.0f} {tb:>12.3f} {ob / tb:>6.2f}")


if __name__ == "__main__":
    main()
