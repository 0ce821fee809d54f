"""A save is all or nothing: refused before writing on a disk too small, never leaving a
half-written model (even when killed), and it says what it wrote."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import sample_models
import workbench
from workbench import trt_convert as trt
from workbench.durable_files import format_bytes
from workbench.engines.runtime import atomic_save
from workbench.engines.runtime.atomic_save import NotEnoughSpaceError

REPO = Path(__file__).resolve().parents[2]


def converted(name: str = "quickstart_mlp") -> trt.TrtGraphConverterV2:
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(sample_models.build(name)))
    converter.convert()
    converter.build(lambda: iter([[np.zeros([4, 8, 8], np.float32)]]))
    return converter


def test_a_disk_too_small_is_refused_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    converter = converted()
    monkeypatch.setattr(atomic_save, "free_bytes", lambda path: 10_000)
    with pytest.raises(NotEnoughSpaceError, match=r"needs about .* and 10\.0 KB are free"):
        converter.save(str(tmp_path / "out"))
    assert not list(tmp_path.iterdir())


def test_an_empty_directory_is_saved_into_and_the_log_says_what_was_written(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    converter = converted()
    (tmp_path / "out").mkdir()
    with caplog.at_level(logging.INFO, logger="workbench.engines"):
        converter.save(str(tmp_path / "out"))
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert f"saved {tmp_path / 'out'}: {format_bytes(total)} in {len(files)} files" in caplog.text
    assert sorted(os.listdir(tmp_path)) == ["out"]
    workbench.load(tmp_path / "out")


KILLED_SAVE = """
import sys, time
from pathlib import Path
import numpy as np
import sample_models
from workbench import trt_convert as trt
from workbench.engines.runtime import saving

def stalled(*args, **kwargs):  # the SavedModel is written, the engines are not yet
    Path(sys.argv[2]).touch()
    time.sleep(120)

saving._segment_entry = stalled
model = sample_models.build("quickstart_mlp")
converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(model))
converter.convert()
converter.build(lambda: iter([[np.zeros([4, 8, 8], np.float32)]]))
converter.save(sys.argv[1])
"""


def loads_as_a_model(path: Path) -> bool:
    for load in (workbench.load, lambda p: tf.saved_model.load(str(p))):
        try:
            load(path)
            return True
        except Exception:  # noqa: BLE001 - any refusal is what is wanted
            pass
    return False


def test_a_save_killed_midway_leaves_nothing_that_loads(tmp_path: Path) -> None:
    sample_models.build("quickstart_mlp")
    target, signal_file = tmp_path / "out", tmp_path / "stalled"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen([sys.executable, "-c", KILLED_SAVE, str(target), str(signal_file)],
                             cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not signal_file.exists():
            assert child.poll() is None and time.monotonic() < deadline, "the save never began"
            time.sleep(0.2)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    left = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert not target.exists() and left  # the hidden staging directory, half-written
    assert any((p / "variables").is_dir() for p in left)  # killed after the SavedModel
    assert not any(loads_as_a_model(p) for p in left)
    # The next save into that directory removes what the killed one left.
    converted().save(str(target))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "stalled"]
    assert loads_as_a_model(target)
