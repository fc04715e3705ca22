# Runs a job spec through `ringmaster-node agent` and returns its telemetry, for the benchmarks
# that time training from the workers' own step events.
import json
import os
import subprocess
import tempfile


def run_spec(node, spec, timeout=900):
    """The decoded telemetry events the agent printed for `spec` (a dict), in order."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
        path = f.name
    try:
        out = subprocess.run([node, "agent", "--spec", path, "--ignore-stdin"], check=True,
                             capture_output=True, text=True, timeout=timeout).stdout
    finally:
        os.unlink(path)
    return [json.loads(line) for line in out.splitlines()]


def step_times(events, rank=0):
    """step -> the time ("t") of `rank`'s step event."""
    return {e["step"]: e["t"] for e in events if e["type"] == "step" and e["rank"] == rank}
