"""The process's own memory: freed heap handed back to the OS."""

from __future__ import annotations

import ctypes
import platform

import pytest

from workbench.hardware import _malloc_trim, release_free_memory


def _resident_bytes() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) * 1024


@pytest.mark.skipif(platform.system() != "Linux" or _malloc_trim() is None,
                    reason="glibc's malloc_trim")
def test_freed_heap_blocks_between_live_ones_are_handed_back() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size = 96 * 1024  # under glibc's mmap threshold: from the heap
    blocks = [libc.malloc(size) for _ in range(4000)]
    for block in blocks:
        ctypes.memset(block, 1, size)
    for block in blocks[::2]:  # 190 MB freed, each between two live blocks: kept by free()
        libc.free(block)
    freed = _resident_bytes()
    release_free_memory()
    assert freed - _resident_bytes() > 100 * 2**20
    for block in blocks[1::2]:
        libc.free(block)
