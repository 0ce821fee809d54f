"""`del converter, func` frees what they held, as a notebook user expects: the converter, its
converted function, the conversion session (the prepared graph), the TensorFlow functions, the
engine ops, their ONNX Runtime sessions and the compiled op's sessions are all gone, with no
`gc.collect()`, and the process's memory comes back; a `workbench.load()`ed model's too."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import workbench
from workbench import environment
from workbench import trt_convert as trt
from workbench.engines.runtime.native_op import NativeSession
from workbench.engines.runtime.native_op import library as native_library
from workbench.hardware import release_free_memory

pytestmark = pytest.mark.slow

FEATURES, HIDDEN, OUT = 1024, 8192, 512  # two engines of 32 MB and 16 MB of weights
WEIGHTS = 4 * (FEATURES * HIDDEN + HIDDEN * OUT)


class TwoEngines(tf.Module):
    """relu(x W1 + b1), a cumsum (no TF-TRT converter: it splits the engines), relu(. W2 + b2)."""

    def __init__(self) -> None:
        super().__init__()
        rng = tf.random.Generator.from_seed(0)
        self.w1 = tf.Variable(rng.normal([FEATURES, HIDDEN]) * 0.01)
        self.b1 = tf.Variable(tf.zeros([HIDDEN]))
        self.w2 = tf.Variable(rng.normal([HIDDEN, OUT]) * 0.01)
        self.b2 = tf.Variable(tf.zeros([OUT]))

    @tf.function(input_signature=[tf.TensorSpec([None, FEATURES], tf.float32, name="x")])
    def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
        h = tf.math.cumsum(tf.nn.relu(tf.matmul(x, self.w1) + self.b1), axis=1)
        return {"y": tf.nn.relu(tf.matmul(h, self.w2) + self.b2)}


@pytest.fixture(scope="module")
def two_engines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("memory") / "two_engines"
    module = TwoEngines()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


def rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def convert_call_save(model: Path, out: Path) -> tuple[Any, Any]:
    """A notebook's cells: convert, call, save, call again."""
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(model))
    func = converter.convert()
    x = np.random.default_rng(0).normal(size=(8, FEATURES)).astype(np.float32)
    func(x)
    converter.save(str(out), overwrite=True)
    func(x)
    return converter, func


def weak_references(converter: Any, func: Any) -> dict[str, weakref.ref[Any]]:
    """Weak references to the converter, its function and everything holding weights."""
    held: dict[str, weakref.ref[Any]] = {
        "converter": weakref.ref(converter), "converted function": weakref.ref(func),
        "conversion session": weakref.ref(converter.session),
        "TensorFlow function": weakref.ref(func.function)}
    for name, op in func.ops.items():
        held[f"{name} op"] = weakref.ref(op)
        ((_, engine),) = op.engines()
        held[f"{name} engine"] = weakref.ref(engine)
        session = engine.native if isinstance(engine.native, NativeSession) else engine._session
        held[f"{name} session"] = weakref.ref(session)
    kinds = {type(e.native).__name__ for op in func.ops.values() for _, e in op.engines()}
    assert kinds == {"NativeSession", "NoneType"}  # one engine compiled, one through Python
    return held


def test_del_of_the_converter_and_its_function_frees_what_they_held(
        two_engines: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = native_library.load()
    if lib is None:
        pytest.skip(f"no compiled engine op: {native_library.unavailable_reason()}")
    # The 16 MB engine is called by the compiled op, the 32 MB one through a numpy_function.
    monkeypatch.setenv(environment.NATIVE_CALL_MAX_BYTES.name, str(24 << 20))
    convert_call_save(two_engines, tmp_path / "warm-up")  # TensorFlow's and ORT's first use
    release_free_memory()
    before = rss()
    converter, func = convert_call_save(two_engines, tmp_path / "saved")
    held = weak_references(converter, func)
    keys = [r().key for name, r in held.items() if isinstance(r(), NativeSession)]
    assert rss() - before > WEIGHTS  # the engines' sessions and the prepared graph at least

    del converter, func  # and no gc.collect(), as in a notebook
    alive = [name for name, ref in held.items() if ref() is not None]
    assert not alive, f"still alive after del: {', '.join(alive)}"
    assert keys and all(lib.c.wb_ort_calls(key) == -1 for key in keys)  # the op's, closed
    release_free_memory()
    kept = rss() - before
    assert kept < WEIGHTS / 2, f"{kept / 2**20:.0f} MB kept of {WEIGHTS / 2**20:.0f} MB weights"

    # The same for the saved model reloaded: its engines are called the same two ways.
    reloaded = workbench.load(tmp_path / "saved")
    reloaded(np.ones((8, FEATURES), np.float32))
    held = {"reloaded": weakref.ref(reloaded), **{
        f"{name} engine": weakref.ref(e) for name, op in reloaded.ops.items()
        for _, e in op.engines()}}
    del reloaded
    alive = [name for name, ref in held.items() if ref() is not None]
    assert len(held) == 3 and not alive, f"still alive after del: {', '.join(alive)}"
