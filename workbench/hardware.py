"""The machine every figure is labelled with: one CPU name for all backends and profilers."""

from __future__ import annotations

import os
import platform
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
