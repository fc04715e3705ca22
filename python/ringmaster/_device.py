"""What the rank runs on and how much memory it holds: the hello's device fields and the step's
memory fields, from torch.cuda on a GPU and from /proc on the host (as the engine's host allocator
reports the process's resident set), and CUDA events as timing marks.
"""

import os


def cpu_model():
    """The CPU's model name from /proc/cpuinfo ("AMD EPYC 7B13"), or "cpu" when it says none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return "cpu"


def resolve_device(torch, requested, local_rank):
    """The device the rank reports: `requested` when given ("cuda:1", a torch.device), else
    cuda:<LOCAL_RANK> when torch sees a GPU, else cpu. Returns (name, CUDA index or None)."""
    if requested is not None:
        name = str(requested)
    elif torch is not None and torch.cuda.is_available():
        name = "cuda:%d" % (local_rank % torch.cuda.device_count())
    else:
        name = "cpu"
    if name == "cuda":
        name = "cuda:%d" % torch.cuda.current_device()
    if name.startswith("cuda:"):
        return name, int(name[len("cuda:"):])
    return "cpu", None


def describe_device(torch, cuda_index):
    """(device_name, device_memory_total) for the hello: the GPU's name and total memory, or the
    CPU's model and 0 (unknown, docs/telemetry.md)."""
    if cuda_index is None:
        return cpu_model(), 0
    properties = torch.cuda.get_device_properties(cuda_index)
    return properties.name, int(properties.total_memory)


_NO_FIGURES = {"mem_allocated": 0, "mem_peak": 0, "mem_reserved": 0, "device_mem_used": 0}


class HostMemory:
    """The step's memory on the host, from the process's resident set: mem_allocated, mem_reserved
    and device_mem_used are the resident bytes at the step's end (/proc/self/statm, the engine's
    host figure for device_mem_used), mem_peak the resident peak during the step (VmHWM, reset
    after each step by writing 5 to /proc/self/clear_refs). Where the reset is refused, mem_peak
    is the process's peak since it started and `warning` says so. The /proc files stay open and
    are read again from their start (pread): a step pays a few microseconds, not the tens that
    opening them would cost. Without /proc the figures are 0 and `warning` says why."""

    def __init__(self):
        self._page = os.sysconf("SC_PAGE_SIZE")
        self.warning = None
        self._statm = self._status = self._clear_refs = None
        try:
            self._statm = os.open("/proc/self/statm", os.O_RDONLY)
            self._status = os.open("/proc/self/status", os.O_RDONLY)
        except OSError as e:
            self.warning = "no memory figures: /proc/self cannot be read (%s)" % e
            return
        try:
            self._clear_refs = os.open("/proc/self/clear_refs", os.O_WRONLY)
        except OSError as e:
            self._refuse_reset(e)
        self._reset_peak()

    def _refuse_reset(self, error):
        self.warning = ("mem_peak is the process's resident peak since it started: the peak "
                        "cannot be reset per step (/proc/self/clear_refs: %s)" % error.strerror)

    def _reset_peak(self):
        if self._clear_refs is None:
            return
        try:
            os.write(self._clear_refs, b"5")
        except OSError as e:
            os.close(self._clear_refs)
            self._clear_refs = None
            self._refuse_reset(e)

    def step_memory(self):
        if self._status is None:
            return dict(_NO_FIGURES)
        try:
            resident = int(os.pread(self._statm, 256, 0).split()[1]) * self._page
            status = os.pread(self._status, 8192, 0)
            at = status.index(b"VmHWM:") + len(b"VmHWM:")
            peak = max(resident, int(status[at:status.index(b"kB", at)]) * 1024)
        except (OSError, ValueError, IndexError) as e:
            self.warning = "no memory figures: /proc/self cannot be read (%s)" % e
            return dict(_NO_FIGURES)
        self._reset_peak()
        return {"mem_allocated": resident, "mem_peak": peak, "mem_reserved": resident,
                "device_mem_used": resident}


class CudaMemory:
    """The step's memory on a GPU, from torch's caching allocator: memory_allocated,
    max_memory_allocated (its peak is reset after each step), memory_reserved, and the device's
    used bytes over all processes (mem_get_info: total - free)."""

    def __init__(self, torch, index):
        self._cuda = torch.cuda
        self._index = index
        self.warning = None
        self._cuda.reset_peak_memory_stats(index)

    def step_memory(self):
        cuda, index = self._cuda, self._index
        figures = {"mem_allocated": int(cuda.memory_allocated(index)),
                   "mem_peak": int(cuda.max_memory_allocated(index)),
                   "mem_reserved": int(cuda.memory_reserved(index))}
        cuda.reset_peak_memory_stats(index)
        if hasattr(cuda, "mem_get_info"):
            free, total = cuda.mem_get_info(index)
            figures["device_mem_used"] = int(total - free)
        else:
            self.warning = ("torch.cuda has no mem_get_info (torch before 1.11): device_mem_used "
                            "is this process's memory_reserved")
            figures["device_mem_used"] = figures["mem_reserved"]
        return figures


class CudaMarks:
    """CUDA events as the comm ledger's timing marks: record(device) records a timing event on
    that device's current stream."""

    def __init__(self, torch):
        self._torch = torch

    def record(self, device):
        event = self._torch.cuda.Event(enable_timing=True)
        event.record(self._torch.cuda.current_stream(device))
        return event
