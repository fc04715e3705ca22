"""Communication bookkeeping shared by the torch.distributed wrappers and the DDP hook: each
operation's record (numbered per group, timed by the host clock or by CUDA events), the flight
recorder of the last operations, the `comm` events, and the communication times of the step.

The figures mean what the engine's mean: bytes as nccl-tests counts them (engine/comm/
communicator_ops.cpp), algbw = bytes / duration and busbw = algbw x the op's bus factor
(engine/comm/comm_op.cpp), flight records in FlightRecorder::dump's shape. Nothing here imports
torch: CUDA events arrive already made.
"""

import collections
import threading
import time

# Operations whose bus factor is (n-1)/n (nccl-tests); all_reduce's is 2(n-1)/n, the others' 1.
_SHARED_OPS = frozenset(("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"))
P2P_OPS = frozenset(("send", "recv"))


def bus_factor(op, ranks):
    """nccl-tests' bus-bandwidth factor of `op` over `ranks` ranks (engine/comm/comm_op.cpp)."""
    if op == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if op in _SHARED_OPS:
        return (ranks - 1) / ranks
    return 1.0


def bandwidths(op, ranks, nbytes, duration_ms):
    """(algbw_gbps, busbw_gbps) as the engine computes them: GB/s of 1e9 bytes, 0 for an op that
    took no measurable time; a one-rank group's op moves nothing, so its busbw is 0."""
    algbw = nbytes / (duration_ms * 1e6) if duration_ms > 0 else 0.0
    busbw = algbw * bus_factor(op, ranks) if ranks > 1 else 0.0
    return algbw, busbw


def _now_us():
    return int(time.time() * 1e6)


class FlightRecorder:
    """The last `capacity` operations, oldest first, each a record in the engine's shape: seq, op,
    group, bytes, dtype, state (started, completed, failed), scheduled_us, peer (rooted and p2p
    ops), started_us, finished_us (microseconds since the epoch)."""

    def __init__(self, capacity):
        self._ring = collections.deque(maxlen=max(1, capacity))

    def record(self, seq, op, group, nbytes, dtype, peer):
        now = _now_us()
        entry = {"seq": seq, "op": op, "group": group, "bytes": nbytes, "dtype": dtype,
                 "state": "started", "scheduled_us": now}
        if peer >= 0:
            entry["peer"] = peer
        entry["started_us"] = now
        self._ring.append(entry)
        return entry

    @staticmethod
    def finish(entry, state, end_wall=None):
        """Moves a record to `state`, finished at `end_wall` (seconds since the epoch; now when
        None)."""
        entry["state"] = state
        entry["finished_us"] = _now_us() if end_wall is None else int(end_wall * 1e6)

    def dump(self):
        """A copy of the records (a JSON array), oldest first."""
        return [dict(entry) for entry in list(self._ring)]


class OpRecord:
    """One operation from its launch to its completion. `start` and `end` are marks: host times
    (time.perf_counter seconds) or CUDA events, which durations are measured between."""

    __slots__ = ("op", "group", "dim", "ranks", "seq", "nbytes", "dtype", "step", "blocking",
                 "cuda_device", "start", "end", "end_wall", "entry", "duration_ms")

    def __init__(self, op, group, dim, ranks, seq, nbytes, dtype, step, blocking, cuda_device,
                 start, entry):
        self.op = op
        self.group = group
        self.dim = dim  # the group's mesh dimension ("dp", "tp", "pp", "world"), or None
        self.ranks = ranks
        self.seq = seq
        self.nbytes = nbytes
        self.dtype = dtype
        self.step = step
        self.blocking = blocking  # the training thread waited for it: all of it was exposed
        self.cuda_device = cuda_device  # timed by CUDA events on this device; None: host clock
        self.start = start
        self.end = None
        self.end_wall = None  # when it completed, seconds since the epoch
        self.entry = entry  # its flight record
        self.duration_ms = None  # known once completed (and, on CUDA, resolved)


class DdpPass:
    """The gradient buckets of one backward pass of a DDP model. The bucket DDP reports last
    (GradBucket.is_last) is launched when the backward's last gradients are ready: from then the
    training thread waits for every bucket, so the time from that launch to the last bucket's
    completion is the pass's exposed communication."""

    __slots__ = ("records", "backward_done")

    def __init__(self):
        self.records = []
        self.backward_done = None  # the last bucket's launch mark, once it came


def _elapsed_ms(start, end):
    if isinstance(start, float):
        return (end - start) * 1000.0
    end.synchronize()
    return start.elapsed_time(end)


class CommLedger:
    """Numbers, records and reports the operations of a rank, and sums the communication of each
    step. Operations timed on the host are reported as they complete; those timed by CUDA events
    are resolved when the step is reported (take_step_times), when the device has run them.

    launch / complete / fail may be called from any thread (completion callbacks run on the
    backend's threads); take_step_times from the training thread.
    """

    def __init__(self, emit_comm, flight_recorder_size, cuda_marks=None):
        self._emit_comm = emit_comm  # emit_comm(body, end_wall)
        self._cuda_marks = cuda_marks  # records CUDA events (_device.CudaMarks), or None
        self._lock = threading.Lock()
        self._next_seq = {}  # (group, p2p) -> the next seq_op
        self.recorder = FlightRecorder(flight_recorder_size)
        self.step = 1  # the step being run: the last one reported + 1
        self._comm_ms = 0.0
        self._exposed_ms = 0.0
        self._unresolved = []  # completed operations timed by CUDA events
        self._ddp_pass = None  # the DDP backward pass whose buckets are being launched
        self._ddp_passes = []  # passes launched in full, whose exposed time is still to be summed

    def launch(self, op, group, ranks, nbytes, dtype, peer=-1, blocking=True, cuda_device=None,
               ddp_bucket=None, dim=None):
        """Records an operation about to start and returns its record. `cuda_device`: time it by
        CUDA events on that device's current stream; `ddp_bucket`: None, or whether it is the
        DDP backward pass's last bucket (GradBucket.is_last); `dim`: the group's mesh dimension,
        which its comm event carries (None: the event has no dim)."""
        key = (group, op in P2P_OPS)
        with self._lock:
            seq = self._next_seq.get(key, 0)
            self._next_seq[key] = seq + 1
            step = self.step
        entry = self.recorder.record(seq, op, group, nbytes, dtype, peer)
        start = (time.perf_counter() if cuda_device is None
                 else self._cuda_marks.record(cuda_device))
        record = OpRecord(op, group, dim, ranks, seq, nbytes, dtype, step, blocking, cuda_device,
                          start, entry)
        if ddp_bucket is not None:
            with self._lock:
                if self._ddp_pass is None:
                    self._ddp_pass = DdpPass()
                ddp_pass = self._ddp_pass
                ddp_pass.records.append(record)
                if ddp_bucket:
                    ddp_pass.backward_done = start
                    self._ddp_passes.append(ddp_pass)
                    self._ddp_pass = None
        return record

    def complete(self, record):
        """The operation has completed (on CUDA: has been queued up to its end on the stream the
        caller now uses, where its end event is recorded; its flight record stays "started"
        until the event is seen done)."""
        if record.cuda_device is None:
            record.end = time.perf_counter()
            record.end_wall = time.time()
            record.duration_ms = (record.end - record.start) * 1000.0
            FlightRecorder.finish(record.entry, "completed", record.end_wall)
            self._report(record)
        else:
            record.end = self._cuda_marks.record(record.cuda_device)
            with self._lock:
                self._unresolved.append(record)

    def fail(self, record):
        FlightRecorder.finish(record.entry, "failed")

    def _report(self, record):
        algbw, busbw = bandwidths(record.op, record.ranks, record.nbytes, record.duration_ms)
        with self._lock:
            self._comm_ms += record.duration_ms
            if record.blocking:
                self._exposed_ms += record.duration_ms
        body = {"seq_op": record.seq, "op": record.op, "group": record.group,
                "bytes": record.nbytes, "dtype": record.dtype, "duration_ms": record.duration_ms,
                "algbw_gbps": algbw, "busbw_gbps": busbw, "step": record.step}
        if record.dim is not None:
            body["dim"] = record.dim
        self._emit_comm(body, record.end_wall)

    def _resolve_cuda(self):
        """Reports the completed CUDA-timed operations, waiting for the device to reach them; each
        is stamped with its end on the host clock, through one reference event per device."""
        with self._lock:
            records, self._unresolved = self._unresolved, []
        references = {}
        for record in records:
            device = record.cuda_device
            if device not in references:
                reference = self._cuda_marks.record(device)
                reference.synchronize()
                references[device] = (reference, time.time())
            reference, wall = references[device]
            record.duration_ms = max(0.0, _elapsed_ms(record.start, record.end))
            record.end_wall = wall - max(0.0, record.end.elapsed_time(reference)) / 1000.0
            FlightRecorder.finish(record.entry, "completed", record.end_wall)
            self._report(record)

    def take_step_times(self):
        """(comm_ms, exposed_comm_ms) of the operations that completed since the previous call.
        Exposed: the blocking operations in full and, of each DDP backward pass, the wait from its
        last bucket's launch to its last completion; never more than comm_ms."""
        self._resolve_cuda()
        with self._lock:
            passes = [p for p in self._ddp_passes
                      if all(r.duration_ms is not None for r in p.records)]
            self._ddp_passes = [p for p in self._ddp_passes if p not in passes]
        ddp_exposed = 0.0
        for ddp_pass in passes:
            waited = max(_elapsed_ms(ddp_pass.backward_done, r.end) for r in ddp_pass.records)
            ddp_exposed += min(max(0.0, waited), sum(r.duration_ms for r in ddp_pass.records))
        with self._lock:
            comm_ms, exposed_ms = self._comm_ms, self._exposed_ms + ddp_exposed
            self._comm_ms = self._exposed_ms = 0.0
        return comm_ms, min(exposed_ms, comm_ms)

    def flush(self):
        """Reports what CUDA-timed operations remain (at exit)."""
        self._resolve_cuda()
