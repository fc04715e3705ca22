# The Python reporter's cost on a small-model DDP step: the same step (the 784-256-256-10 MLP of
# torch_ddp.py, batch 64 per rank, SGD with momentum, Gloo, one thread per rank) on 2 local ranks
# without the reporter and with it, each configuration run in turn for a few rounds, and a table of
# each configuration's median step time (over the best round, as these machines are noisy), its
# ratio to the plain step, the process's CPU time per step (all its threads: the reporter's writer
# and the backend's included; less disturbed than wall time by other processes on the machine)
# and the median time a log() call itself took on the training thread. As the machine's load
# moves these figures by more than the reporter does, a last measurement alternates in one run:
# 50-step blocks with and without log(), compared block against block. Spawns its own ranks:
# `python3 bench/reporter_overhead.py`.
#
# Configurations:
#   plain     no ringmaster at all
#   off       ringmaster's calls without RINGMASTER_TELEMETRY_FD (the no-op a script pays outside
#             Ringmaster)
#   log       init() and one log() per step, telemetry on (a pipe this script drains)
#   watched   log, watch_distributed and watch_ddp: a comm event per gradient bucket too
#   alternate telemetry on, log() in every other block of 50 steps (the last measurement)
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "python")
CONFIGS = ("plain", "off", "log", "watched")
BLOCK = 50  # steps per block of the alternating run


def rank_main(args):
    """One rank: --warmup steps, then --steps timed ones. Rank 0 prints one JSON object: the
    steps' times and its log() calls' times (ms), its CPU time per step (ms) and, alternating, the
    times of the steps without log()."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                        nn.Linear(256, 10))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    reporter = None
    if args.config != "plain":
        import ringmaster as reporter
        reporter.init(optimizer)
        if args.config == "watched":
            reporter.watch_distributed()
    model = nn.parallel.DistributedDataParallel(net)
    if args.config == "watched":
        model = reporter.watch_ddp(model)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(64, 784)
    y = torch.randint(0, 10, (64,))
    times, log_times, times_without = [], [], []
    for step in range(1, args.warmup + args.steps + 1):
        if step == args.warmup + 1:
            cpu_start = time.process_time()
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        logs = reporter is not None and (args.config != "alternate" or (step // BLOCK) % 2 == 1)
        if logs:
            log_start = time.perf_counter()
            reporter.log(step, loss=loss, samples=64)
            if step > args.warmup:
                log_times.append((time.perf_counter() - log_start) * 1000)
        if step > args.warmup:
            (times if logs or args.config != "alternate" else times_without).append(
                (time.perf_counter() - start) * 1000)
    if dist.get_rank() == 0:
        print(json.dumps({"steps": times, "logs": log_times, "without_log": times_without,
                          "cpu_ms": (time.process_time() - cpu_start) * 1000 / args.steps}),
              flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drain(fd, counts, index):
    """Reads a rank's telemetry pipe to its end, counting its lines."""
    with os.fdopen(fd, "rb") as stream:
        for _ in stream:
            counts[index] += 1


def run_config(config, args):
    """Rank 0's figures of one run of `config` (rank_main's JSON object) and the telemetry lines
    per rank."""
    port = str(free_port())
    procs, readers, counts = [], [], [0] * args.ranks
    for rank in range(args.ranks):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                   WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(args.ranks), OMP_NUM_THREADS="1",
                   PYTHONPATH=PACKAGE + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("RINGMASTER_TELEMETRY_FD", None)
        pass_fds = ()
        if config in ("log", "watched", "alternate"):
            read_end, write_end = os.pipe()
            env["RINGMASTER_TELEMETRY_FD"] = str(write_end)
            pass_fds = (write_end,)
        command = [sys.executable, os.path.abspath(__file__), "--rank-of", config,
                   "--steps", str(args.steps), "--warmup", str(args.warmup)]
        procs.append(subprocess.Popen(command, env=env, pass_fds=pass_fds,
                                      stdout=subprocess.PIPE, text=True))
        if pass_fds:
            os.close(write_end)
            reader = threading.Thread(target=drain, args=(read_end, counts, rank))
            reader.start()
            readers.append(reader)
    outputs = [proc.communicate()[0] for proc in procs]
    for reader in readers:
        reader.join()
    if any(proc.returncode != 0 for proc in procs):
        sys.exit("%s: a rank failed (exit codes %s)" % (config, [p.returncode for p in procs]))
    return json.loads(outputs[0]), counts


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rank-of", choices=CONFIGS + ("alternate",), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_of:
        args.config = args.rank_of
        rank_main(args)
        return

    import torch
    print("CPU: %s, %d cores; torch %s; %d ranks, %d timed steps after %d, best of %d rounds"
          % (cpu_model(), os.cpu_count(), torch.__version__, args.ranks, args.steps,
             args.warmup, args.rounds), flush=True)
    # Per configuration, the best round's figures: (median step, CPU per step, median log()).
    best = {config: (float("inf"), None, None) for config in CONFIGS}
    lines = {}
    for round_index in range(args.rounds):
        for config in CONFIGS:  # in turn, so that a slow minute touches every configuration
            figures, counts = run_config(config, args)
            median_ms, cpu_ms = statistics.median(figures["steps"]), figures["cpu_ms"]
            log_ms = statistics.median(figures["logs"]) if figures["logs"] else None
            if median_ms < best[config][0]:
                best[config] = (median_ms, cpu_ms, log_ms)
            lines[config] = counts
            print("round %d %-8s median step %.3f ms, CPU %.3f ms per step"
                  % (round_index + 1, config, median_ms, cpu_ms), flush=True)
    plain_ms, plain_cpu_ms, _ = best["plain"]
    print()
    print("| configuration | median step ms | ratio | CPU ms per step | ratio | median log() ms "
          "| telemetry lines per rank |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for config in CONFIGS:
        median_ms, cpu_ms, log_ms = best[config]
        print("| %s | %.3f | %.3f | %.3f | %.3f | %s | %s |" % (
            config, median_ms, median_ms / plain_ms, cpu_ms, cpu_ms / plain_cpu_ms,
            "-" if log_ms is None else "%.4f" % log_ms,
            ", ".join(str(c) for c in lines[config])))

    print()
    print("In one run, %d-step blocks alternately with and without log() (the same processes, "
          "the same minutes):" % BLOCK)
    print("| round | median step with log() ms | without ms | ratio |")
    print("| --- | --- | --- | --- |")
    for round_index in range(args.rounds):
        figures, _ = run_config("alternate", args)
        with_log = statistics.median(figures["steps"])
        without = statistics.median(figures["without_log"])
        print("| %d | %.3f | %.3f | %.3f |" % (round_index + 1, with_log, without,
                                               with_log / without), flush=True)


if __name__ == "__main__":
    main()
