"""The telemetry channel: events stamped, numbered, encoded as protocol-v1 JSON lines
(docs/telemetry.md) and written to a file descriptor by a daemon thread through a bounded queue, so
that a training step never waits on the pipe, only on a full queue. It mirrors the engine's
TelemetryWriter (engine/telemetry/writer.h): whole lines from one thread, so they never
interleave (several to a write when they queued up together), looped over partial writes; lines
over 1 MiB cut or dropped; a reader that has gone breaks the writer, never the process.
"""

import json
import os
import queue
import select
import signal
import threading
import time

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 1 << 20
# A log or error message longer than this is cut when its line would pass MAX_LINE_BYTES.
MAX_MESSAGE_BYTES = 64 << 10

# After an event wakes it, the writer thread waits this long for the events that follow, so that
# the events of many steps cost one wake-up (one turn of the GIL) and one write. Waking once per
# event (2 ms here) cost a 2-rank DDP step of 7 ms on 2 cores 0.2 - 0.5 ms; at 50 ms the cost is
# within the noise of alternating 50-step blocks with and without log().
_GATHER_S = 0.05
_STOP = object()  # the queue's last item: the thread ends after writing what came before


def _dumps(event):
    text = json.dumps(event, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (undecodable file names, os.fsdecode) become U+FFFD, as the engine's
        # encoder replaces invalid UTF-8.
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def _cut_message(message):
    data = message.encode("utf-8", "replace")
    if len(data) <= MAX_MESSAGE_BYTES:
        return message
    kept = data[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")
    return kept + " [cut: %d more bytes]" % (len(data) - len(kept.encode("utf-8")))


def encode_line(rank, seq, stamp, event_type, body):
    """The event as one compact JSON line without its newline, the envelope first; None when it
    cannot fit MAX_LINE_BYTES even with its message cut, its flight recorder halved and a step's
    custom metrics left out."""
    event = {"v": PROTOCOL_VERSION, "type": event_type, "rank": rank, "seq": seq,
             "t": round(stamp, 6)}
    event.update(body)
    line = _dumps(event)
    if len(line) <= MAX_LINE_BYTES:
        return line
    if "message" in event:
        event["message"] = _cut_message(event["message"])
        line = _dumps(event)
    records = event.get("flight_recorder")
    while len(line) > MAX_LINE_BYTES and records:
        records = records[len(records) // 2:] if len(records) > 1 else []
        event["flight_recorder"] = records
        line = _dumps(event)
    if len(line) > MAX_LINE_BYTES and "metrics" in event:
        del event["metrics"]  # a step's custom metrics too many to fit: the step itself still goes
        line = _dumps(event)
    return line if len(line) <= MAX_LINE_BYTES else None


class TelemetryWriter:
    """Stamps and queues events for one rank; a daemon thread numbers, encodes and writes them.

    emit() is thread-safe and returns at once unless the queue is full (the reader is behind).
    Nothing here holds a lock that Python code takes, so a stop signal's exception raised
    anywhere in the training thread never leaves the writer stuck (the queue is C's SimpleQueue,
    and the sequence numbers are the writer thread's, in the queue's order). Only the process
    that made the writer emits: a forked child (a DataLoader worker) inherits the object, but its
    emits do nothing. The descriptor is not owned: close() leaves it open.
    """

    def __init__(self, fd, rank, queue_size=65536):
        self._fd = fd
        self._rank = rank
        self._pid = os.getpid()
        self._queue = queue.SimpleQueue()
        self._queue_size = queue_size
        # Set once the stream's last event (done) is queued: later events, such as a comm event
        # whose completion callback runs on a backend thread during the exit, are dropped.
        self._sealed = False
        self._seal_lock = threading.Lock()  # a C lock: `with` on it survives async exceptions
        self._stopped = False
        self.error = None  # the OSError that broke the writer, if one did
        self.dropped = 0  # events not written: too large, or after the writer broke
        self._thread = threading.Thread(target=self._run, name="ringmaster-telemetry",
                                        daemon=True)
        self._thread.start()

    def emit(self, event_type, body, stamp=None, timeout=None, last=False):
        """Queues one event (body: its fields after the envelope, JSON-ready). `stamp`: the
        event's time in seconds since the epoch (now when None). Waits while the queue is full,
        at most `timeout` seconds when given; returns whether the event was queued. `last`: the
        stream's last event; nothing is queued after it."""
        if self._sealed or os.getpid() != self._pid:
            return False
        if stamp is None:
            stamp = time.time()
        if self._queue.qsize() >= self._queue_size and not self._wait_for_room(timeout):
            return False
        with self._seal_lock:
            if self._sealed:
                return False
            self._queue.put((stamp, event_type, body))
            self._sealed = last
        return True

    def _wait_for_room(self, timeout):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._queue.qsize() >= self._queue_size:
            if not self._thread.is_alive() or (deadline is not None
                                               and time.monotonic() > deadline):
                return False
            time.sleep(0.001)
        return True

    def close(self, timeout):
        """Writes what was queued (waiting at most `timeout` seconds) and stops the thread;
        later emits do nothing. Returns whether everything queued was written or dropped."""
        if self._stopped or os.getpid() != self._pid:
            return True
        self._stopped = True
        with self._seal_lock:
            self._sealed = True
        self._queue.put(_STOP)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self):
        # A reader that has gone raises EPIPE here instead of killing the process, whatever the
        # script did with SIGPIPE's disposition: the signal stays pending on this thread.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
        seq = 0
        stopping = False
        while not stopping:
            # What is queued goes out together: one write for many lines, one wake-up of this
            # thread (and one turn of the GIL) for a burst of events.
            batch = [self._queue.get()]
            if batch[0] is not _STOP:
                time.sleep(_GATHER_S)
            while len(batch) < 1024 and not self._queue.empty():
                batch.append(self._queue.get())
            lines = []
            for item in batch:
                if item is _STOP:
                    stopping = True
                    break
                # An event that is not written still uses its number: a reader sees the gap.
                line = None if self.error is not None else encode_line(self._rank, seq, *item)
                seq += 1
                if line is None:
                    self.dropped += 1
                else:
                    lines.append(line)
            if not lines:
                continue
            try:
                self._write_all(b"\n".join(lines) + b"\n")
            except OSError as e:
                self.error = e
                self.dropped += len(lines)

    def _write_all(self, data):
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)  # EINTR is retried by Python (PEP 475)
            except BlockingIOError:  # a non-blocking descriptor that is full: wait until it drains
                select.select([], [self._fd], [])
                continue
            view = view[written:]
