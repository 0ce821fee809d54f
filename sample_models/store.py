"""A build cache of directories that are either complete or absent.

A model is built into a hidden temporary directory next to its final place, a marker file is
written last, and only then is the directory moved into place. A directory without a matching
marker (interrupted build, older recipe) is never reused. A per-name lock file serialises
concurrent builders (parallel test workers, two terminals).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MARKER = "BUILD_INFO.json"


@dataclass(frozen=True)
class Outcome:
    """What `ensure` did: the final directory, whether it built it, and how long it took."""

    path: Path
    built: bool
    seconds: float


def read_marker(directory: Path) -> dict | None:
    """The marker of a finished build, or None if there is none or it is unreadable."""
    try:
        return json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return None


def is_current(directory: Path, version: str) -> bool:
    marker = read_marker(directory)
    return marker is not None and marker.get("version") == version


def ensure(root: Path, name: str, version: str, make: Callable[[Path], None]) -> Outcome:
    """Reuse `root/name` if it was built with `version`, else build it with `make(tmp_dir)`."""
    start = time.perf_counter()
    target = root / name
    if is_current(target, version):  # fast path without the lock: markers are written last
        return Outcome(target, False, time.perf_counter() - start)
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{name}.lock"):
        if is_current(target, version):  # someone else built it while we waited
            return Outcome(target, False, time.perf_counter() - start)
        _remove_leftovers(root, name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=root))
        tmp.chmod(0o755)  # mkdtemp's 0700 would make the model private to its builder
        try:
            make(tmp)
            marker = {"name": name, "version": version, "built_at": time.time(),
                      "seconds": round(time.perf_counter() - start, 3)}
            (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
            _replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Outcome(target, True, time.perf_counter() - start)


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_leftovers(root: Path, name: str) -> None:
    """Temporary dirs of builds that died; safe to delete because we hold the name's lock."""
    for pattern in (f".{name}.tmp-*", f".{name}.old-*"):
        for leftover in root.glob(pattern):
            shutil.rmtree(leftover, ignore_errors=True)


def _replace(new: Path, target: Path) -> None:
    """Move `new` to `target`. A stale `target` is renamed aside first because rename can't
    overwrite a non-empty directory; `target` is missing only between the two renames."""
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        target.rename(old / target.name)
        new.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        new.rename(target)
