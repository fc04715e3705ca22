# Runs `ringmaster-node bench-comm` (whichever backend it picks, or --backend) and OpenMPI's
# MPI_Allreduce (mpi_collectives, run by mpirun) on the same sizes, world sizes and iteration counts
# (at least -n, more for small sizes: --target bytes' worth), ranks on this host, alternating them
# for a few rounds (ours, OpenMPI over shared memory, OpenMPI over TCP loopback, ours, ...; the best
# round per size on each side, as these machines are noisy), and prints one table per world size
# with the bus bandwidth of each and the ratios (ours / OpenMPI's: above 1 is faster). OpenMPI's
# shared memory (btl vader) is the anchor for ranks on one host, its TCP (btl tcp on lo) the fair
# one for our TCP path between hosts.
import argparse
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from comm_vs_torch import parse_size  # noqa: E402

# mpirun's settings for each OpenMPI column: ranks unbound (two cores, up to four ranks), the ob1
# messaging layer so that the btl choice holds, TCP on loopback (OpenMPI excludes lo by default).
MPI_TRANSPORTS = {
    "shm": ("shared memory (btl vader)", ["--mca", "pml", "ob1", "--mca", "btl", "self,vader"]),
    "tcp": ("TCP on lo (btl tcp)", ["--mca", "pml", "ob1", "--mca", "btl", "self,tcp", "--mca",
                                    "btl_tcp_if_include", "lo"]),
}
TIMEOUT_S = 900  # one invocation (every size of one side on one world size)


def bus_factor(n):
    return 2 * (n - 1) / n  # all_reduce


def iters_for(size, args):
    return max(args.n, args.target // size)


def table(out, what):
    """{bytes: us} from a bench-comm-style table; exits if a row counted wrong elements."""
    times = {}
    for line in out.splitlines():
        cols = line.split()
        if line.startswith("#") or len(cols) < 10:
            continue
        if cols[8] not in ("0", "N/A"):
            sys.exit(f"{what} reported {cols[8]} wrong elements at {cols[0]} bytes")
        times[int(cols[0])] = float(cols[5])
    return times


def run(cmd, what):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        sys.exit(f"{what} failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}{done.stderr}")
    return done.stdout


def ours(ranks, sizes, args):
    """{bytes: us} and the backend bench-comm names in its header."""
    times, backend = {}, "?"
    for size in sizes:
        cmd = [args.node, "bench-comm", "--ranks", str(ranks), "--op", "all_reduce", "-b",
               str(size), "-e", str(size), "-n", str(iters_for(size, args)), "-w", str(args.w),
               "--check"] + (["--backend", args.backend] if args.backend else [])
        out = run(cmd, "bench-comm")
        match = re.search(r"backend (\S+?),", out)
        backend = match.group(1) if match else backend
        times.update(table(out, "bench-comm"))
    return times, backend


def openmpi(transport, ranks, sizes, args):
    cmd = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
           "--bind-to", "none"] + MPI_TRANSPORTS[transport][1] + [
               args.mpi_bench, "-s", ",".join(map(str, sizes)), "-n", str(args.n), "-t",
               str(args.target), "-w", str(args.w)]
    return table(run(cmd, f"OpenMPI ({transport})"), f"mpi_collectives ({transport})")


def keep_best(best, times):
    for size, us in times.items():
        best[size] = min(us, best.get(size, us))


def processor():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = re.search(r"Model name:\s*(.+)", out).group(1).strip()
    except (OSError, AttributeError):
        model = "unknown processor"
    return f"{model}, {os.cpu_count()} CPUs"


def mpi_version(mpirun):
    out = subprocess.run([mpirun, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "OpenMPI"


def print_table(ranks, backend, best, args):
    transports = args.transports
    print(f"\nall_reduce float32 sum, {ranks} ranks on one host ({processor()}, load average "
          f"{os.getloadavg()[0]:.1f}); ours: bench-comm, backend {backend}; "
          f"{mpi_version(args.mpirun)}: " +
          ", ".join(f"{t} = {MPI_TRANSPORTS[t][0]}" for t in transports) +
          f"; -n {args.n}+ -w {args.w}, best of {args.rounds} alternating rounds")
    header = f"{'bytes':>10} {'ours us':>10} {'ours busbw':>11}"
    for t in transports:
        header += f" {'mpi ' + t + ' us':>12} {'mpi ' + t + ' busbw':>15} {'ratio ' + t:>10}"
    print(header)
    factor = bus_factor(ranks)
    for size in sorted(best["ours"]):
        o = best["ours"][size]
        ob = size / (o * 1e3) * factor
        row = f"{size:>10} {o:>10.1f} {ob:>11.3f}"
        for t in transports:
            m = best[t].get(size)
            if m is None:
                row += f" {'-':>12} {'-':>15} {'-':>10}"
                continue
            row += f" {m:>12.1f} {size / (m * 1e3) * factor:>15.3f} {m / o:>10.3g}"
        print(row, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--node", required=True, help="path of ringmaster-node")
    parser.add_argument("--mpi-bench", help="path of mpi_collectives (default: the node's build's "
                        "bench/mpi_collectives)")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--backend", help="bench-comm's --backend (default: its own choice)")
    parser.add_argument("--transports", default="shm,tcp", help="OpenMPI columns: shm, tcp")
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--sizes", default="4K,64K,1M,16M,64M")
    parser.add_argument("-n", type=int, default=20, help="timed operations, at least")
    parser.add_argument("-w", type=int, default=5, help="warm-up operations")
    # 32M: 8,192 operations at 4 KiB, about 20 ms, against 1,024 (2-3 ms) at 4M, which left the
    # small sizes at the mercy of one scheduling hiccup.
    parser.add_argument("--target", default="32M",
                        help="time at least this many bytes' worth of operations per size")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    args.target = parse_size(args.target)
    args.transports = args.transports.split(",")
    if not set(args.transports) <= set(MPI_TRANSPORTS):
        sys.exit(f"--transports: {args.transports} is not a list of {', '.join(MPI_TRANSPORTS)}")
    if args.mpi_bench is None:
        build = os.path.dirname(os.path.dirname(os.path.abspath(args.node)))
        args.mpi_bench = os.path.join(build, "bench", "mpi_collectives")
    if shutil.which(args.mpirun) is None or not os.path.exists(args.mpi_bench):
        sys.exit(f"OpenMPI anchor unavailable ({args.mpirun}, {args.mpi_bench}): bash "
                 "scripts/install-deps.sh openmpi-bin libopenmpi-dev, then build mpi_collectives")

    sizes = [parse_size(s) for s in args.sizes.split(",")]
    for ranks in map(int, args.ranks.split(",")):
        best, backend = {"ours": {}, **{t: {} for t in args.transports}}, "?"
        for _ in range(args.rounds):
            times, backend = ours(ranks, sizes, args)
            keep_best(best["ours"], times)
            for t in args.transports:
                keep_best(best[t], openmpi(t, ranks, sizes, args))
        print_table(ranks, backend, best, args)


if __name__ == "__main__":
    main()
