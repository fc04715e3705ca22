"""The reporter of one rank: its hello, its step events, the hooks that turn an uncaught
exception, the interpreter's exit and a stop signal into `error` and `done` events, and the
watches of torch.distributed. The public functions in __init__.py drive one Reporter per process.
"""

import atexit
import math
import operator
import os
import signal
import socket
import sys
import threading
import time
import traceback

from . import _comm, _device, _writer

# The step event's own fields that log() takes by name (docs/telemetry.md, `step`), with their
# domains; lr is required on the wire, read from the optimizer unless given. Any other name is a
# custom metric (the step's "metrics"), whose name the recorder checks against its bounds.
_COUNT_METRICS = ("samples", "tokens", "skipped")
_RATE_METRICS = ("grad_norm", "tokens_per_s", "mfu", "loss_scale")
ACCEPTED_METRICS = ("lr",) + _COUNT_METRICS + ("accuracy",) + _RATE_METRICS
_MAX_COUNT = 1 << 53
_MAX_MAGNITUDE = 1e300
_EXIT_CANCELLED = 130  # the engine's worker's status when stopped by SIGTERM or SIGINT
# How long the exit waits, after a DDP communication hook ran, before the interpreter finalizes.
# Gloo's threads release the Python callbacks of the hook's futures shortly after the last step;
# one that needs the GIL once finalization has begun is ended by Python inside C++ frames, and
# the process aborts ("terminate called without an active exception"; torch 1.13, Python 3.11:
# 7 of 16 2-rank runs with torch's own allreduce_hook, none of 16 with this wait).
_DDP_EXIT_WAIT_S = 0.1


class Environment:
    """The rank's identity from torchrun's environment and the agent's RINGMASTER_* variables."""

    def __init__(self, environ):
        def integer(name, default):
            text = environ.get(name, "")
            if text == "":
                return default
            value = int(text)
            if value < 0 or value > 2 ** 31 - 1:
                raise ValueError("%s=%s is not a rank-sized integer" % (name, text))
            return value

        self.rank = integer("RANK", 0)
        self.world_size = integer("WORLD_SIZE", 1)
        self.local_rank = integer("LOCAL_RANK", self.rank)
        if self.world_size < 1 or self.rank >= self.world_size:
            raise ValueError("RANK=%d is outside WORLD_SIZE=%d" % (self.rank, self.world_size))
        if self.local_rank >= self.world_size:
            raise ValueError("LOCAL_RANK=%d is outside WORLD_SIZE=%d"
                             % (self.local_rank, self.world_size))
        # The agent's restart count (launch.max_restarts), as torchrun names it.
        self.attempt = integer("RINGMASTER_ATTEMPT", integer("TORCHELASTIC_RESTART_COUNT", 0))
        self.version = environ.get("RINGMASTER_VERSION", "")
        self.run_id = environ.get("RINGMASTER_RUN_ID") or None
        self.strategy = environ.get("RINGMASTER_STRATEGY") or (
            "ddp" if self.world_size > 1 else "single")


def _number(value):
    """A plain Python number from an int, a float, a one-element tensor or array."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _count(value):
    value = _number(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    value = operator.index(value)
    if not 0 <= value <= _MAX_COUNT:
        raise ValueError("%d is outside [0, 2^53]" % value)
    return value


def _custom(value):
    """A custom metric's value: a finite float within 1e300, else None (null on the wire).
    Raises ValueError for anything that is no number (a string, a tensor of several elements)."""
    try:
        value = _number(value)
        if isinstance(value, (str, bytes)):
            raise TypeError("a %s is not a number" % type(value).__name__)
        value = float(value)
    except Exception as e:  # torch raises RuntimeError for .item() of several elements
        raise ValueError("%s: %s" % (type(e).__name__, e))
    return value if math.isfinite(value) and abs(value) <= _MAX_MAGNITUDE else None


def _real(value, low, high):
    value = float(_number(value))
    if not low <= value <= high:  # NaN fails too
        raise ValueError("%r is outside [%g, %g]" % (value, low, high))
    return value


class Reporter:
    """Telemetry of one rank on one file descriptor (see ringmaster.init)."""

    def __init__(self, fd, environment, optimizer, flight_recorder_size, device, drain_timeout,
                 mesh=None):
        self._pid = os.getpid()
        self._env = environment
        self._optimizer = optimizer
        self._flight_recorder_size = flight_recorder_size
        self._drain_timeout = drain_timeout
        self._lock = threading.Lock()
        self._warned = set()
        self._last_step = 0
        self._done = False
        self._stop_signal = None  # the stop signal being handled, once one came
        self._ledger = None  # made by the first watch
        self._ddp_hooked = False  # a DDP communication hook of ours is registered
        self._distributed = None
        self._mesh = mesh  # the script's _mesh.Mesh: the hello's mesh, the comm events' dims
        self._torch = _import_torch()
        self._writer = _writer.TelemetryWriter(fd, environment.rank)
        device_text, cuda_index = _device.resolve_device(self._torch, device,
                                                         environment.local_rank)
        device_name, memory_total = _device.describe_device(self._torch, cuda_index)
        self._memory = (_device.CudaMemory(self._torch, cuda_index) if cuda_index is not None
                        else _device.HostMemory())
        # Under Slurm a node is known by its name (SLURMD_NODENAME), as the agent names it.
        host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        hello = {"world_size": environment.world_size, "local_rank": environment.local_rank,
                 "host": host, "pid": self._pid, "device": device_text,
                 "device_name": device_name, "device_memory_total": memory_total,
                 "version": environment.version or _package_version()}
        if environment.run_id is not None:
            hello["run_id"] = environment.run_id
        hello["strategy"] = environment.strategy
        hello["attempt"] = environment.attempt
        if mesh is not None:
            hello.update(mesh.hello_fields())
        self._writer.emit("hello", hello)
        self._started = time.perf_counter()
        self._previous_log = self._started
        self._install_hooks()

    # -----------------------------------------------------------------------------------------
    # Events.

    def warn(self, key, message):
        """One `log` event of level warn per key."""
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        self._writer.emit("log", {"level": "warn", "message": "ringmaster: " + message})

    def set_optimizer(self, optimizer):
        self._optimizer = optimizer

    def set_mesh(self, mesh):
        """Labels the comm events by `mesh` from now on (the script's, checked by __init__.py to
        be the only one). Given after the hello, which then went without it: said once."""
        if self._mesh is None:
            self._mesh = mesh
            self.warn("late-mesh", "the mesh came after the hello, which went without it: its "
                      "dimensions label the communication, but the run has no mesh or rank "
                      "coordinates; pass init(mesh=...), or call watch_distributed(mesh=...) "
                      "before init()")
        if self._distributed is not None:
            self._distributed.groups.set_mesh(self._mesh)

    def log(self, step, loss, metrics):
        if os.getpid() != self._pid:
            return
        now = time.perf_counter()
        step_ms = (now - self._previous_log) * 1000.0
        self._previous_log = now
        try:
            step = _count(step)
        except (TypeError, ValueError) as e:
            self.warn("step", "log(step=%r): the step must be an integer in [0, 2^53] (%s); "
                      "step not reported" % (step, e))
            return
        comm_ms = exposed_ms = 0.0
        if self._ledger is not None:
            comm_ms, exposed_ms = self._ledger.take_step_times()
            self._ledger.step = step + 1
        values = self._metric_values(metrics)
        custom = values.pop("custom")
        body = {"step": step, "loss": self._loss_value(loss),
                "lr": values.pop("lr", None)}
        if body["lr"] is None:
            body["lr"] = self._optimizer_lr()
        if "samples" not in values:
            self.warn("samples", "log() without samples=: steps report 0 samples")
        body["samples"] = values.pop("samples", 0)
        body.update(step_ms=step_ms, compute_ms=max(0.0, step_ms - exposed_ms), comm_ms=comm_ms,
                    exposed_comm_ms=exposed_ms)
        body.update(self._memory.step_memory())
        if self._memory.warning:
            self.warn("memory", self._memory.warning)
        if "tokens" in values and "tokens_per_s" not in values and step_ms > 0:
            values["tokens_per_s"] = values["tokens"] * 1000.0 / step_ms
        for name in ("grad_norm", "accuracy", "tokens", "tokens_per_s", "mfu", "loss_scale",
                     "skipped"):
            if name in values:
                body[name] = values[name]
        if custom:
            body["metrics"] = custom
        self._last_step = step
        self._writer.emit("step", body)

    def _loss_value(self, loss):
        if loss is None:
            return None
        try:
            value = float(_number(loss))
        except (TypeError, ValueError) as e:
            self.warn("loss", "log(loss=%r): not a number (%s); reported as null" % (loss, e))
            return None
        return value if math.isfinite(value) and abs(value) <= _MAX_MAGNITUDE else None

    def _optimizer_lr(self):
        if self._optimizer is None:
            self.warn("lr", "no learning rate: pass init(optimizer) or log(..., lr=...); "
                      "lr is reported as 0")
            return 0.0
        try:
            return _real(self._optimizer.param_groups[0]["lr"], -_MAX_MAGNITUDE, _MAX_MAGNITUDE)
        except (AttributeError, LookupError, TypeError, ValueError) as e:
            self.warn("lr", "the optimizer's param_groups[0]['lr'] cannot be read (%s: %s); lr "
                      "is reported as 0" % (type(e).__name__, e))
            return 0.0

    def _metric_values(self, metrics):
        """The metrics the step event has fields for, converted and checked (a value outside its
        field's domain is left out with one warning per name), and under "custom" every other
        numeric metric: a non-finite value (or one beyond 1e300) as None, sent as null for the
        recorder to count; a value that is no number is left out with one warning per name."""
        values = {"custom": {}}
        for name, value in metrics.items():
            if value is None:
                continue
            try:
                if name in _COUNT_METRICS:
                    values[name] = _count(value)
                elif name == "accuracy":
                    values[name] = _real(value, 0.0, 1.0)
                elif name == "lr":
                    values[name] = _real(value, -_MAX_MAGNITUDE, _MAX_MAGNITUDE)
                elif name == "grad_norm" and not math.isfinite(float(_number(value))):
                    continue  # a non-finite norm is absent (docs/telemetry.md)
                elif name in _RATE_METRICS:
                    values[name] = _real(value, 0.0, _MAX_MAGNITUDE)
                else:
                    values["custom"][name] = _custom(value)
            except (TypeError, ValueError) as e:
                self.warn("value:" + name, "log(%s=%r): %s; left out" % (name, value, e))
        return values

    def _report_exception(self, exc_type, exc, tb, fatal, thread_name=None):
        text = "".join(traceback.format_exception(exc_type, exc, tb)).rstrip("\n")
        if thread_name is not None:
            text = "Exception in thread %s:\n%s" % (thread_name, text)
        frames = traceback.extract_tb(tb) if tb is not None else []
        where = "%s:%d" % (frames[-1].filename, frames[-1].lineno) if frames else "unknown"
        body = {"message": text, "kind": "exception", "where": where, "step": self._last_step,
                "fatal": fatal}
        if self._ledger is not None:
            body["flight_recorder"] = self._ledger.recorder.dump()
        self._writer.emit("error", body)

    def _finish(self, status):
        """The stream's last event, once."""
        with self._lock:
            if self._done:
                return
            self._done = True
        if self._ledger is not None:
            try:
                self._ledger.flush()
            except Exception as e:  # a device in a bad state at exit: its last ops go unreported
                self.warn("flush", "the last CUDA-timed operations are not reported (%s)" % e)
        self._writer.emit("done", {"status": status, "final_step": self._last_step,
                                   "wall_s": time.perf_counter() - self._started},
                          timeout=self._drain_timeout, last=True)

    # -----------------------------------------------------------------------------------------
    # Watching torch.distributed.

    def _comm_ledger(self):
        if self._ledger is None:
            torch = self._torch
            marks = (_device.CudaMarks(torch) if torch is not None and torch.cuda.is_available()
                     else None)
            self._ledger = _comm.CommLedger(self._emit_comm, self._flight_recorder_size, marks)
            self._ledger.step = self._last_step + 1
        return self._ledger

    def _emit_comm(self, body, end_wall):
        self._writer.emit("comm", body, stamp=end_wall)

    def _distributed_watch(self):
        torch = self._torch
        if torch is None or not hasattr(torch, "distributed") or not \
                torch.distributed.is_available():
            self.warn("no-distributed", "this torch has no torch.distributed: nothing to watch")
            return None
        if self._distributed is None:
            from . import _distributed
            self._distributed = _distributed.DistributedWatch(torch, self._comm_ledger(),
                                                              self.warn, self._pid)
            self._distributed.groups.set_mesh(self._mesh)
        return self._distributed

    def watch_distributed(self, mesh=None):
        if mesh is not None:
            self.set_mesh(mesh)
        watch = self._distributed_watch()
        if watch is not None:
            watch.install()

    def watch_ddp(self, model):
        watch = self._distributed_watch()
        if watch is None:
            return model
        if not hasattr(model, "register_comm_hook"):
            self.warn("no-comm-hook", "%s has no register_comm_hook (not a DistributedDataParallel "
                      "of torch >= 1.8): its buckets are not watched" % type(model).__name__)
            return model
        try:
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        except ImportError as e:
            self.warn("no-default-hooks", "torch has no default DDP all-reduce hook (%s): DDP's "
                      "buckets are not watched" % e)
            return model
        from . import _distributed
        hook = _distributed.DdpCommHook(watch.groups, self._comm_ledger(), allreduce_hook,
                                        self.warn, self._pid)
        try:
            model.register_comm_hook(getattr(model, "process_group", None), hook)
            self._ddp_hooked = True
        except Exception as e:  # a hook of the script's own, or a backward already run
            self.warn("comm-hook", "DDP's communication hook cannot be registered (%s: %s): its "
                      "buckets are not watched" % (type(e).__name__, e))
        return model

    # -----------------------------------------------------------------------------------------
    # Exit, uncaught exceptions and stop signals.

    def _install_hooks(self):
        self._previous_excepthook = sys.excepthook
        sys.excepthook = self._on_uncaught
        if hasattr(threading, "excepthook"):  # Python 3.8 and later
            self._previous_thread_hook = threading.excepthook
            threading.excepthook = self._on_thread_exception
        atexit.register(self._at_exit)
        self._previous_handlers = {}
        if threading.current_thread() is not threading.main_thread():
            self.warn("signals", "init() ran outside the main thread: SIGTERM and SIGINT are not "
                      "turned into a cancelled run")
            return
        # Only signals the script left to Python's defaults: a handler of its own stays in charge.
        defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
        for signum, default in defaults.items():
            if signal.getsignal(signum) is default:
                self._previous_handlers[signum] = default
                signal.signal(signum, self._on_stop_signal)

    def _on_stop_signal(self, signum, frame):
        if os.getpid() != self._pid:  # a forked child inherited the handler: the default's turn
            previous = self._previous_handlers[signum]
            signal.signal(signum, previous)
            if previous is signal.SIG_DFL:
                os.kill(os.getpid(), signum)
                return
            previous(signum, frame)
            return
        if self._stop_signal is not None:  # already stopping
            return
        self._stop_signal = signum
        print("[rank %d] %s: stopping after step %d" % (self._env.rank,
                                                         signal.Signals(signum).name,
                                                         self._last_step),
              file=sys.stderr, flush=True)
        raise SystemExit(_EXIT_CANCELLED)

    def _on_uncaught(self, exc_type, exc, tb):
        cancelled = False
        if os.getpid() == self._pid:
            try:
                if self._stop_signal is not None or issubclass(exc_type, KeyboardInterrupt):
                    cancelled = True
                    self._finish("cancelled")
                else:
                    self._report_exception(exc_type, exc, tb, fatal=True)
                    self._finish("failed")
            except Exception:  # the script's own error is what must come out
                pass
        self._previous_excepthook(exc_type, exc, tb)
        if cancelled and self._stop_signal is not None:
            # The stop signal's SystemExit turned into another exception on its way out (raised
            # inside a callback of torch's C++): still a cancellation, with its exit status.
            atexit._run_exitfuncs()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (AttributeError, OSError, ValueError):
                    pass
            os._exit(_EXIT_CANCELLED)

    def _on_thread_exception(self, args):
        if os.getpid() == self._pid and args.exc_type is not SystemExit:
            try:
                name = args.thread.name if args.thread is not None else "?"
                self._report_exception(args.exc_type, args.exc_value, args.exc_traceback,
                                       fatal=False, thread_name=name)
            except Exception:
                pass
        self._previous_thread_hook(args)

    def _at_exit(self):
        if os.getpid() != self._pid:
            return
        self._finish("cancelled" if self._stop_signal is not None else "completed")
        self._writer.close(self._drain_timeout)
        if self._ddp_hooked:
            time.sleep(_DDP_EXIT_WAIT_S)


def _import_torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _package_version():
    from . import __version__
    return __version__
