"""The machine every figure is labelled with: one CPU name for all backends and profilers."""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Callable
from functools import cache


@cache
def cpu_device_name() -> str:
    """`CPU <model> (<arch>, <n> cores)`: the cores this process may use, not the host's."""
    model = _cpu_model()
    prefix = f"CPU {model}" if model else "CPU"
    return f"{prefix} ({platform.machine() or 'unknown arch'}, {usable_cores()} cores)"


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor().strip()


def release_free_memory() -> None:
    """Hands the C heap's free pages back to the OS (glibc's `malloc_trim`; nothing where
    there is none). Memory freed by engine builds and saves otherwise stays resident: after a
    large block is freed glibc serves blocks up to 32 MB from its heap, which then fragments
    (EfficientNetV2L's engine builds left 0.5x its weights resident). It takes milliseconds."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
