"""Durable files: a write that a crash, a kill or a power cut leaves whole or absent.

Used by every store that keeps one JSON file per item (the app's runs, the tuning trials): the
bytes go to a hidden temporary file beside the target, are fsynced, then renamed over the
target (`os.replace` is atomic on POSIX), and the directory is fsynced so the rename survives.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"


def atomic_write(path: str | os.PathLike, data: bytes) -> Path:
    """Writes `data` to `path` atomically and durably (parents created); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # A temporary file of its own for every writer (process or thread): a shared one would let
    # a second writer truncate it while the first renames it into place.
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX,
                                dir=target.parent)
    temp = Path(name)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide a shared store from its other users
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_directory(target.parent)
    return target


def fsync_directory(path: str | os.PathLike) -> None:
    """Makes a rename or unlink in `path` survive a power cut, where the platform allows."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:  # some platforms cannot open directories; the rename is still atomic
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def json_scalar(value: Any) -> Any:
    """`json.dumps(default=...)` for figures: numpy scalars (np.float32 latency, ...) are
    stored as plain numbers; anything else is refused."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot store a {type(value).__name__} as JSON")


def check_format(data: Any, expected: str) -> dict[str, Any]:
    """`data` as a store's JSON document of format `expected`; ValueError says why it is not."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("format") != expected:
        raise ValueError(f"format is {data.get('format')!r}, expected {expected!r}")
    return data


def format_bytes(size: float) -> str:
    """`size` in B, KB, MB or GB (powers of 1000, as `ls -h --si` and disk makers count)."""
    for unit in ("B", "KB", "MB"):
        if abs(size) < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.2f} GB"
