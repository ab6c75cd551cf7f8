"""Measure what a computation costs: its CPU time, and its peak memory as the operating system counts it.

`cpu_time_ms` times a function in CPU time, the least of a few runs.

`peak_memory` runs a function in a copy of the current process (``os.fork``)
and reads how far that copy's resident memory rose while the function ran.
The copy starts with everything the process already holds (PyTorch loaded,
tensors made so far), so only what the function itself needs is counted,
and nothing the function does can leave memory behind in the caller.

`peak_memory_here` measures the same in the current process, for a process that is a measurement
of its own already (a rank that `attn_ref.context_parallel.launch` started, which cannot be copied
with the process group it belongs to).

Both are Linux only: they read ``/proc/self/status`` and reset the high-water mark
through ``/proc/self/clear_refs`` (Linux 4.0 and later).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = ["cpu_time_ms", "peak_memory", "peak_memory_here"]

_M_MMAP_THRESHOLD = (
    -3
)  # glibc's mallopt parameter: allocations of at least this many bytes get their own pages


def cpu_time_ms(fn: Callable[[], object], repeat: int = 5) -> float:
    """The least CPU time of ``repeat`` calls of ``fn()``, in milliseconds.

    CPU time (``time.process_time``, all threads of this process) does not count the
    moments when other programs have the processor, and the least of several runs leaves
    out the first call's one-off costs. Waiting (``time.sleep``, reading a file) costs none.

    Args:
        fn: The function to time, called with no arguments.
        repeat: How many times to call it.

    Returns:
        The least of the ``repeat`` CPU times, in milliseconds.

    Examples:
        >>> cpu_time_ms(lambda: time.sleep(0.05)) < 5
        True
    """
    return 1e3 * min(timeit.repeat(fn, timer=time.process_time, repeat=repeat, number=1))


def peak_memory(fn: Callable[..., object], *args: Any, **kwargs: Any) -> int:
    """Bytes by which resident memory rose, at its peak, while ``fn(*args, **kwargs)`` ran.

    The measurement runs in a forked copy of this process, so that the
    caller's memory is untouched. In that copy:

    1. PyTorch runs on one thread, and glibc's ``malloc`` is told to give every
       allocation of 4 KiB or more its own pages, returned to the system
       when freed, and to return the memory it already holds free
       (``malloc_trim``). Resident memory then follows the tensors alive:
       otherwise an allocation could reuse memory that is free but still
       resident, and go uncounted.
    2. The high-water mark of resident memory (``VmHWM``) is reset to the
       current resident memory (``VmRSS``), ``fn`` runs, and the mark is read.
    3. Pages of the program's own code that ``fn`` touches for the first time
       (PyTorch's kernels, read from its libraries) count as resident too, as
       file-backed memory (``RssFile``); their growth is subtracted, since it
       is code, not data. Code first read after the peak is subtracted too,
       so the result may fall short by that much: some tens of KiB.

    Python objects that ``fn`` makes count too. Python (3.10 and later) takes
    them from arenas of 1 MiB, so a call that needs a new arena can measure up
    to about 1 MiB more than its tensors; compare results well above that.

    Args:
        fn: The function to measure. What it creates, including its inputs
            if it makes them, and what it returns are counted; tensors that
            exist before the call (``args`` among them) are not.
        *args: Positional arguments for ``fn``.
        **kwargs: Keyword arguments for ``fn``.

    Returns:
        The peak rise of resident memory, in bytes.

    Raises:
        OSError: Not on Linux (no ``/proc/self/clear_refs`` or ``os.fork``).
        RuntimeError: ``fn`` raised; the message carries its error.

    Examples:
        >>> allocated = peak_memory(torch.ones, 2**22)  # 4 Mi float32 numbers: 16 MiB
        >>> round(allocated / 2**20)
        16
    """
    _check_linux("peak_memory")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: measure, report through the pipe, and exit without cleaning up
        os.close(read_end)
        try:
            report = str(peak_memory_here(fn, *args, **kwargs))
        except BaseException as error:  # reported to the caller, which raises
            report = f"error {type(error).__name__}: {error}"
        os.write(write_end, report.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read().decode()
    os.waitpid(pid, 0)
    if report.startswith("error"):
        raise RuntimeError(f"the measured function failed: {report.removeprefix('error ')}")
    return int(report)


def peak_memory_here(fn: Callable[..., object], *args: Any, **kwargs: Any) -> int:
    """Bytes by which this process's resident memory rose, at its peak, while ``fn(*args, **kwargs)`` ran.

    What `peak_memory` measures in its copy of the process (steps 1 to 3 there), measured in this
    one: PyTorch is set to one thread, and glibc's ``malloc`` keeps its new setting afterwards.
    For a process that exists to be measured, such as a rank of
    `attn_ref.context_parallel.launch`.

    Raises:
        OSError: Not on Linux (no ``/proc/self/clear_refs``).

    Examples:
        In a process of its own, started by `attn_ref.context_parallel.launch`:

        >>> from attn_ref.context_parallel import launch
        >>> (allocated,) = launch(peak_memory_here, [(torch.ones, 2**22)])  # 16 MiB
        >>> round(allocated / 2**20)
        16
    """
    _check_linux("peak_memory_here")
    torch.set_num_threads(1)  # no worker threads in a forked process
    with contextlib.suppress(AttributeError):  # not glibc: measure with the allocator as it is
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 4096)
        libc.malloc_trim(0)  # memory freed before the call: returned, so that reusing it counts
    Path("/proc/self/clear_refs").write_text("5")  # 5: reset the peak to the current resident size
    before = _status("VmRSS", "RssFile")
    fn(*args, **kwargs)
    after = _status("VmHWM", "RssFile")
    return after["VmHWM"] - before["VmRSS"] - (after["RssFile"] - before["RssFile"])


def _check_linux(name: str) -> None:
    if sys.platform != "linux" or not hasattr(os, "fork") or not Path("/proc/self/clear_refs").exists():
        raise OSError(f"{name} needs Linux: os.fork, /proc/self/status and /proc/self/clear_refs")


def _status(*fields: str) -> dict[str, int]:
    """Fields of ``/proc/self/status`` given in kB, as bytes."""
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in fields:
            values[name] = int(rest.split()[0]) * 1024
    return values
