"""A save that is all or nothing, and says what it wrote.

The model is written into a hidden sibling of the target (`.<name>.saving-<pid>-<random>`)
whose `saved_model.pb` stays hidden (`saved_model.pb.incomplete`) until everything else is
written, so neither `workbench.load` nor `tf.saved_model.load` takes it for a model; then it is
renamed into place (the old model, if any, renamed aside first and removed after). A save
killed midway leaves only its hidden sibling, which the next save into that directory removes.
Before anything is written the disk must have room for the save's peak (`check_free_space`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from workbench.durable_files import format_bytes
from workbench.errors import WorkbenchError

SAVED_MODEL_PB = "saved_model.pb"
HIDDEN_SAVED_MODEL_PB = "saved_model.pb.incomplete"
STAGING_MARK = ".saving-"
SPACE_MARGIN = 1.05  # what the estimate leaves out: GraphDefs, manifest, file system blocks


class NotEnoughSpaceError(WorkbenchError):
    """The disk has less free space than the save needs."""


def free_bytes(path: Path) -> int:
    """Free bytes on the disk holding `path` (its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def check_free_space(target: Path, needed: int) -> None:
    """Refuses a save needing `needed` bytes at its peak where the disk has less free."""
    needed = int(needed * SPACE_MARGIN)
    free = free_bytes(target)
    if needed > free:
        raise NotEnoughSpaceError(
            f"Not enough disk space to save into {target}: the save needs about "
            f"{format_bytes(needed)} at its peak and {format_bytes(free)} are free; free some "
            "space or save elsewhere (nothing was written)")


def refuse_non_empty(target: Path, overwrite: bool) -> None:
    if target.exists() and not overwrite and (not target.is_dir() or any(target.iterdir())):
        raise WorkbenchError(f"{target} already exists and is not empty; choose a new directory "
                             "or pass overwrite=True")


@contextlib.contextmanager
def staged(target: Path) -> Iterator[Path]:
    """A hidden sibling directory to write the model into, moved into place at the end (over
    `target`, once complete); removed if the writing fails."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}{STAGING_MARK}{os.getpid()}-",
                                    dir=target.parent))
    try:
        yield staging
        _reveal_saved_model(staging)
        _move_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def hide_saved_model(directory: Path) -> None:
    """Renames the `saved_model.pb` just written so the directory loads as nothing yet."""
    (directory / SAVED_MODEL_PB).rename(directory / HIDDEN_SAVED_MODEL_PB)


def _reveal_saved_model(directory: Path) -> None:
    hidden = directory / HIDDEN_SAVED_MODEL_PB
    if hidden.exists():
        hidden.rename(directory / SAVED_MODEL_PB)


def remove_stale_staging(target: Path) -> None:
    """Removes the hidden siblings of saves into `target` whose process is gone (killed)."""
    for path in target.parent.glob(f".{target.name}{STAGING_MARK}*"):
        pid = path.name[len(f".{target.name}{STAGING_MARK}"):].split("-", 1)[0]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _move_into_place(staging: Path, target: Path) -> None:
    if not target.exists():
        staging.rename(target)
        return
    old = target.with_name(f".{target.name}.replaced-{staging.name.rsplit('-', 1)[-1]}")
    target.rename(old)
    staging.rename(target)
    if old.is_dir():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.unlink(missing_ok=True)


def written_files(directory: Path) -> dict[str, int]:
    """Each file under `directory` (relative path) -> its size in bytes."""
    return {str(p.relative_to(directory)): p.stat().st_size
            for p in sorted(directory.rglob("*")) if p.is_file()}
