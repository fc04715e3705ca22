"""A program job's rank that leaves processes behind, or fails on its first attempts (issue 32).

    children_program.py MODE PIDS_DIR FAIL_ATTEMPTS

Speaks the telemetry protocol itself on RINGMASTER_TELEMETRY_FD (hello with the attempt from
TORCHELASTIC_RESTART_COUNT, one step, done), so it needs no torch. Every process it leaves
creates PIDS_DIR/rank<RANK>/<its pid> once it is set up, and the rank waits for that before it ends; each
leftover has PIDS_DIR in its command line, for the test to find and kill.

MODE:
  plain           leaves nothing
  holds-stdout    a child in its process group keeps the rank's stdout open and sleeps
  ignores-term    the same, ignoring SIGTERM
  waits           a child holds stdout, and the rank itself sleeps (a run to cancel)
  waits-ignores-term  the same, the child ignoring SIGTERM
  daemon          a daemon: double fork, setsid, every descriptor closed
  escaped-holder  a double fork and setsid that keeps the rank's stdout open
Rank 1 exits with code 3 after its step while the attempt is below FAIL_ATTEMPTS.
"""

import json
import os
import subprocess
import sys
import time

LEFTOVER = """
import os, signal, sys, time
if sys.argv[1].endswith("ignores-term"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("leftover", os.getpid(), "up", flush=True)
open(os.path.join(sys.argv[2], str(os.getpid())), "w").close()
time.sleep(600)
"""


def main():
    mode, pids_dir, fail_attempts = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rank = int(os.environ["RANK"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    channel = int(os.environ["RINGMASTER_TELEMETRY_FD"])
    sequence = [0]

    def emit(kind, **fields):
        event = dict(v=1, type=kind, rank=rank, seq=sequence[0], t=time.time(), **fields)
        os.write(channel, (json.dumps(event) + "\n").encode())
        sequence[0] += 1

    emit("hello", world_size=int(os.environ["WORLD_SIZE"]),
         local_rank=int(os.environ["LOCAL_RANK"]), host="h", pid=os.getpid(), device="cpu",
         device_name="cpu", device_memory_total=0, version=os.environ["RINGMASTER_VERSION"],
         strategy=os.environ["RINGMASTER_STRATEGY"], attempt=attempt)
    rank_dir = os.path.join(pids_dir, "rank%d" % rank)
    os.makedirs(rank_dir, exist_ok=True)
    leftover = [sys.executable, "-c", LEFTOVER, mode, rank_dir]
    if mode in ("holds-stdout", "ignores-term", "waits", "waits-ignores-term"):
        subprocess.Popen(leftover)
    elif mode in ("daemon", "escaped-holder"):
        start_detached(leftover, close_descriptors=mode == "daemon")
    if mode != "plain":
        wait_for_leftover(rank_dir)
    print("rank", rank, "attempt", attempt, "trained", flush=True)
    emit("step", step=1, loss=0.5, lr=0.1, samples=4, step_ms=1, compute_ms=1, comm_ms=0,
         exposed_comm_ms=0, mem_allocated=0, mem_peak=0, mem_reserved=0, device_mem_used=0)
    if rank == 1 and attempt < fail_attempts:
        sys.exit(3)
    if mode.startswith("waits"):
        time.sleep(600)
    emit("done", status="completed", final_step=1, wall_s=0)


def start_detached(command, close_descriptors):
    child = os.fork()
    if child == 0:
        os.setsid()
        if close_descriptors:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, 4096)
        if os.fork() == 0:
            os.execv(command[0], command)
        os._exit(0)
    os.waitpid(child, 0)


def wait_for_leftover(pids_dir):
    deadline = time.time() + 20
    while not os.listdir(pids_dir) and time.time() < deadline:
        time.sleep(0.01)


if __name__ == "__main__":
    main()
