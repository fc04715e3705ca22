# `ringmaster serve` under load (issue 20): a real recorded run (ddp_mlp, 4 local ranks, telemetry
# every step) with no web server at all, and the same run with `ringmaster serve` and --clients
# live pages on it, the two taking turns for --rounds rounds so that the machine's drifting load
# cannot bias their ratio. A live page is one event stream (/api/v1/stream) and, on a `run` event
# (at most every 500 ms, one refresh at a time, as resources/web/src/run.js), the run's detail and
# its loss series at 1000 buckets; each page loads / and its assets when it opens and every
# --reload seconds, asking for br / gzip as a browser does; the pages' threads run at nice 19
# (--client-nice), standing in for browsers elsewhere. Two more clients stop reading: one
# event stream, and one page that pipelines large series requests without reading the answers.
# Prints the recorder's ingest rate per round and condition with the ratio, the API's and the
# assets' latencies, the events the streams received and what became of the stuck clients.
# Python 3 standard library only: `/usr/bin/python3 bench/web_load.py --build build/release`.
import argparse
import http.client
import json
import os
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "resources", "examples", "ddp_mlp.json")
BROWSER_ENCODING = "gzip, deflate, br"


def percentile(values, fraction):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Latencies:
    """Milliseconds per endpoint, from every client thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_name = {}
        self.failures = {}  # name -> [reasons]
        self.recording = False

    def add(self, name, ms, failure):
        with self.lock:
            if not self.recording:  # the run is over and the server stopping
                return
            self.by_name.setdefault(name, []).append(ms)
            if failure:
                self.failures.setdefault(name, []).append(failure)


def timed_get(conn, path, latencies, name, headers=None):
    """GET on a keep-alive connection, the body read whole. A connection the server closed while
    it was idle (its keep-alive timeout) is reopened and the request sent again, as a browser does;
    the time counts both. Returns the body or None."""
    started = time.monotonic()
    failure = None
    body = None
    for _ in range(2):
        failure = None
        try:
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                failure = f"HTTP {response.status}: {body[:200]!r}"
            break
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as error:
            conn.close()
            failure = repr(error)
        except (OSError, http.client.HTTPException) as error:
            conn.close()
            failure = repr(error)
            break
    latencies.add(name, (time.monotonic() - started) * 1000.0, failure)
    return None if failure else body


class Page(threading.Thread):
    """One live page: its assets, its event stream, and a refresh on `run` events."""

    def __init__(self, port, assets, latencies, reload_s, stop, nice):
        super().__init__(daemon=True)
        self.nice = nice
        self.port, self.assets, self.latencies = port, assets, latencies
        self.reload_s, self.stop = reload_s, stop
        self.connected = threading.Event()
        self.run_events = 0
        self.refreshes = 0
        self.error = None

    def load_page(self, conn):
        timed_get(conn, "/", self.latencies, "static /", {"Accept-Encoding": BROWSER_ENCODING})
        for asset in self.assets:
            timed_get(conn, "/assets/" + asset, self.latencies, "static /assets/*",
                      {"Accept-Encoding": BROWSER_ENCODING})

    def run(self):
        # The pages stand in for browsers on other machines: their own CPU comes after the run's
        # and the server's (nice is per thread on Linux), so their latencies include their own
        # waits for a core and are upper bounds.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        api = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            self.load_page(api)
            stream = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            stream.request("GET", "/api/v1/stream")
            response = stream.getresponse()
            if response.status != 200:
                self.error = f"stream answered {response.status}"
                self.connected.set()
                return
            last_refresh = 0.0
            last_reload = time.monotonic()
            event = None
            while not self.stop.is_set():
                line = response.readline()
                if not line:
                    self.error = "the stream ended"
                    break
                line = line.decode().rstrip("\n")
                if line == ": connected":
                    self.connected.set()
                elif line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "run":
                    self.run_events += 1
                    run_id = json.loads(line[6:])["id"]
                    now = time.monotonic()
                    if now - last_refresh >= 0.5:
                        last_refresh = now
                        self.refreshes += 1
                        detail = timed_get(api, f"/api/v1/runs/{run_id}", self.latencies,
                                           "api run")
                        # The page charts a metric once the run's detail lists it.
                        if detail and "loss" in json.loads(detail).get("metrics", []):
                            timed_get(api,
                                      f"/api/v1/runs/{run_id}/series?metric=loss&buckets=1000",
                                      self.latencies, "api series")
                    if self.reload_s > 0 and now - last_reload >= self.reload_s:
                        last_reload = now
                        self.load_page(api)
            stream.close()
        except (OSError, http.client.HTTPException, ValueError) as error:
            self.error = repr(error)
            self.connected.set()
        finally:
            api.close()


def stuck_socket(port, request, receive_buffer=4096):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", port))
    sock.sendall(request)
    return sock


def closed_by_server(sock, limit_s=3.0):
    """Reads what the server sent (the stuck client 'wakes up'); True when the server had closed
    the connection: the bytes end in EOF or a reset instead of more arriving."""
    sock.settimeout(limit_s)
    received = 0
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            data = sock.recv(1 << 20)
            if not data:
                return True, received
            received += len(data)
    except ConnectionResetError:
        return True, received
    except socket.timeout:
        pass
    return False, received


def process_cpu_s(pid):
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ingest_rate(db_path, run_id):
    """Events stored per second while the run trained: the step and communication events whose
    times lie between the run's first and last step event, over that span."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    t0, t1, steps = db.execute(
        "SELECT min(wall_time_s), max(wall_time_s), count(*) FROM steps WHERE run_id = ?",
        (run_id,)).fetchone()
    comm = db.execute("SELECT count(*) FROM comm_events WHERE run_id = ? AND t BETWEEN ? AND ?",
                      (run_id, t0, t1)).fetchone()[0]
    stored = db.execute("SELECT sum(events_stored) FROM attempts WHERE run_id = ?",
                        (run_id,)).fetchone()[0]
    status = db.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    db.close()
    return (steps + comm) / (t1 - t0), t1 - t0, stored, status


def record(args, db_path):
    """One run; returns its id."""
    command = [args.ringmaster, "--db", db_path, "run", SPEC, "--set", f"train.steps={args.steps}",
               "--set", "telemetry.every_steps=1", "-q"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=args.steps * 2 + 300)
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    run_id = db.execute("SELECT max(id) FROM runs").fetchone()[0]
    db.close()
    return run_id


def served_run(args, db_path, latencies, stuck_report):
    """The run with `ringmaster serve` and the clients; returns (run id, per-page counts, server
    CPU s, clients' CPU s)."""
    server = subprocess.Popen([args.ringmaster, "--db", db_path, "serve", "--listen", "127.0.0.1:0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not match:
            raise RuntimeError(f"ringmaster serve printed {line!r}: {server.stderr.read()}")
        port = int(match.group(1))
        assets_dir = os.path.join(os.path.dirname(args.ringmaster), "web")
        assets = sorted(name for name in os.listdir(assets_dir) if name != "index.html") \
            if os.path.isdir(assets_dir) else []
        stop = threading.Event()
        pages = [Page(port, assets, latencies, args.reload, stop, args.client_nice)
                 for _ in range(args.clients)]
        for page in pages:
            page.start()
        for page in pages:
            page.connected.wait(60)
        latencies.recording = True
        # The stuck clients: a stream never read, and a page pipelining big series requests it
        # never reads (the last run's series: all ranks, 4096 buckets).
        stuck_stream = stuck_socket(port, b"GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n\r\n")
        last_run = stuck_report.get("last_run", 1)
        big = (f"GET /api/v1/runs/{last_run}/series?metric=loss&buckets=4096 HTTP/1.1\r\n"
               "Host: x\r\n\r\n").encode()
        stuck_page = stuck_socket(port, big * 64)
        cpu_clients0 = time.process_time()
        cpu_server0 = process_cpu_s(server.pid)
        run_id = record(args, db_path)
        latencies.recording = False
        cpu_server = process_cpu_s(server.pid) - cpu_server0
        cpu_clients = time.process_time() - cpu_clients0
        # Were the others answered while the stuck clients held on? Events keep arriving on every
        # page until the end; the server's verdict on the stuck ones is read now.
        stream_closed, stream_bytes = closed_by_server(stuck_stream)
        page_closed, page_bytes = closed_by_server(stuck_page)
        stuck_report.setdefault("stream", []).append((stream_closed, stream_bytes))
        stuck_report.setdefault("page", []).append((page_closed, page_bytes))
        stuck_stream.close()
        stuck_page.close()
        stop.set()
        counts = [(page.run_events, page.refreshes, page.error) for page in pages]
        return run_id, counts, cpu_server, cpu_clients
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "release"),
                        help="the build directory (its app/ringmaster and app/web/)")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=800, help="training steps per run")
    parser.add_argument("--reload", type=float, default=10.0,
                        help="seconds between a page's reloads of / and its assets (0: never)")
    parser.add_argument("--client-nice", type=int, default=19,
                        help="the page threads' nice value (0: as the run and the server)")
    args = parser.parse_args()
    args.ringmaster = os.path.join(args.build, "app", "ringmaster")

    work = tempfile.mkdtemp(prefix="ringmaster_web_load_")
    db_path = os.path.join(work, "runs.db")
    latencies = Latencies()
    stuck = {}
    rows = []
    pages_total = []
    try:
        stuck["last_run"] = record(argparse.Namespace(**{**vars(args), "steps": 50}), db_path)
        for round_ in range(args.rounds):
            order = ("bare", "served") if round_ % 2 == 0 else ("served", "bare")
            result = {}
            for condition in order:
                if condition == "bare":
                    run_id = record(args, db_path)
                    extra = None
                else:
                    run_id, counts, cpu_server, cpu_clients = served_run(args, db_path, latencies,
                                                                         stuck)
                    pages_total.extend(counts)
                    extra = (cpu_server, cpu_clients)
                stuck["last_run"] = run_id
                rate, span, stored, status = ingest_rate(db_path, run_id)
                result[condition] = (rate, span, stored, status, extra)
                print(f"round {round_ + 1} {condition:6s}: run {run_id} {status}, {stored} events "
                      f"stored, {rate:,.0f} events/s over {span:.1f} s of training", flush=True)
            rows.append(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"ddp_mlp, 4 local ranks, {args.steps} steps, telemetry every step; {args.clients} live "
          f"pages at nice {args.client_nice}; {os.cpu_count()} CPUs")
    print("| round | bare events/s | served events/s | served / bare | server CPU s | clients CPU s |")
    print("| --- | --- | --- | --- | --- | --- |")
    ratios = []
    for i, result in enumerate(rows):
        bare, served = result["bare"], result["served"]
        ratio = served[0] / bare[0]
        ratios.append(ratio)
        print(f"| {i + 1} | {bare[0]:,.0f} | {served[0]:,.0f} | {ratio:.3f} | "
              f"{served[4][0]:.1f} | {served[4][1]:.1f} |")
    print(f"median served / bare: {statistics.median(ratios):.3f} "
          f"(range {min(ratios):.3f} - {max(ratios):.3f})")
    print()
    print("| endpoint | requests | failed | p50 ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in sorted(latencies.by_name):
        values = latencies.by_name[name]
        print(f"| {name} | {len(values)} | {len(latencies.failures.get(name, []))} | "
              f"{percentile(values, 0.5):.1f} | {percentile(values, 0.99):.1f} | "
              f"{max(values):.1f} |")
    for name, reasons in sorted(latencies.failures.items()):
        print(f"failed {name}: {len(reasons)}, first: {reasons[0]}")
    events = [count[0] for count in pages_total]
    errors = [count[2] for count in pages_total if count[2]]
    print()
    print(f"stream `run` events per page and run: min {min(events)}, median "
          f"{statistics.median(events)}, max {max(events)}; refreshes per page and run: median "
          f"{statistics.median(count[1] for count in pages_total)}; pages with an error: "
          f"{len(errors)}{' (' + errors[0] + ')' if errors else ''}")
    for name, label in (("stream", "a stream never read"),
                        ("page", "64 pipelined 4096-bucket series requests never read")):
        verdicts = stuck.get(name, [])
        closed = sum(1 for verdict in verdicts if verdict[0])
        print(f"stuck client, {label}: closed by the server in {closed} of {len(verdicts)} runs "
              f"(bytes it had been sent: {', '.join(str(v[1]) for v in verdicts)})")


if __name__ == "__main__":
    sys.exit(main())
