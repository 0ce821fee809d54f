"""The compiled engine op (`workbench/engines/native_op`): the same outputs as the Python call
path on real models, misses rerun on the Python path exactly as before, and the compiled
library is built once, cached and replaced by the Python path when it cannot be built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sample_models
import workbench
from workbench import environment
from workbench import trt_convert as trt
from workbench.engines.runtime.native_op import library as native_library

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def sample_batch(name: str, batch: int) -> np.ndarray:
    (spec,) = sample_models.recipe(name).inputs.values()
    shape = [batch, *spec.shape[1:]]
    return np.random.default_rng(0).normal(size=shape).astype(np.float32)


def converted(name: str, build_batch: np.ndarray, python: bool, monkeypatch: pytest.MonkeyPatch,
              **params: Any) -> Any:
    """The sample converted and built for `build_batch`, its engine calls on the Python path
    (`python`) or the compiled op (the setting is read when the call graph is made)."""
    if python:
        monkeypatch.setenv(environment.ENGINE_CALLS.name, "python")
    else:
        monkeypatch.delenv(environment.ENGINE_CALLS.name, raising=False)
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(sample_models.build(name)),
                                        **params)
    calibration = None
    if params.get("precision_mode") == "INT8":
        x_calib = sample_models.data(name)["x_calib"]
        calibration = lambda: iter([[x_calib[:32]], [x_calib[32:64]]])  # noqa: E731
    model = converter.convert(calibration_input_fn=calibration)
    converter.build(lambda: iter([[build_batch]]))
    assert model.function is not None  # the call graph, made now (with the setting above)
    return model


def counts(model: Any) -> tuple[int, int]:
    """(engine calls, of them served by the compiled op) over the model's engines."""
    stats = [op.stats for op in model.ops.values()]
    return sum(s.engine_calls for s in stats), sum(s.compiled_calls for s in stats)


def outputs(model: Any, x: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(v) for v in model(x).values()]


def assert_same_outputs(name: str, x: np.ndarray, monkeypatch: pytest.MonkeyPatch,
                        calls: list[np.ndarray] | None = None, **params: Any) -> tuple[Any, Any]:
    """The Python path's and the compiled op's outputs agree on each of `calls` (default: x),
    the compiled op serving every engine call of the second model."""
    python = converted(name, x, True, monkeypatch, **params)
    compiled = converted(name, x, False, monkeypatch, **params)
    for batch in calls or [x]:
        for got, want in zip(outputs(compiled, batch), outputs(python, batch), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert counts(python)[1] == 0
    return python, compiled


@pytest.mark.parametrize("name, params", [
    ("digits_cnn", {}),
    ("digits_cnn", {"precision_mode": "FP16"}),
    ("digits_cnn", {"precision_mode": "INT8"}),
    ("resnet50", {}),
])
def test_compiled_op_gives_the_python_paths_outputs(name: str, params: dict[str, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    x = sample_batch(name, 2)
    smaller = x[:1]  # implicit batch: the batch-2 engine serves batch 1 too
    _, compiled = assert_same_outputs(name, x, monkeypatch, calls=[x, smaller], **params)
    engine_calls, compiled_calls = counts(compiled)
    assert engine_calls == compiled_calls == 2 * len(compiled.ops) > 0


def test_engines_inside_a_map_fn_loop_run_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    x = sample_batch("map_fn_cnn", 3)
    _, compiled = assert_same_outputs("map_fn_cnn", x, monkeypatch)
    per_engine = sorted(op.stats.compiled_calls for op in compiled.ops.values())
    assert per_engine == [1, 3]  # one engine after the loop, one inside it (once per image)


def test_shapes_outside_the_profile_run_the_native_segment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    x = sample_models.data("quickstart_mlp")["x_test"][:16]
    python, compiled = assert_same_outputs("quickstart_mlp", x[:8], monkeypatch,
                                           calls=[x[:8], x],  # batch 16: outside the profile
                                           use_dynamic_shape=True)
    for model in (python, compiled):
        (op,) = model.ops.values()
        assert (op.stats.engine_calls, op.stats.native_calls) == (1, 1)
        (reason,) = op.fallback_reasons
        assert reason.startswith(f"no optimization profile of {op.name} accepts")
    (op,) = compiled.ops.values()
    assert op.stats.compiled_calls == 1


def test_a_closed_session_misses_to_the_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    x = sample_models.data("quickstart_mlp")["x_test"][:8]
    model = converted("quickstart_mlp", x, False, monkeypatch)
    want = outputs(model, x)
    (op,) = model.ops.values()
    ((_, engine),) = op.engines()
    engine.native.close()  # the op now fails its call, like an ONNX Runtime error would
    for got, expected in zip(outputs(model, x), want, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert (op.stats.engine_calls, op.stats.compiled_calls, op.stats.native_calls) == (2, 1, 0)


def test_saved_models_do_not_reference_the_op(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    x = sample_batch("digits_cnn", 2)
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("digits_cnn")))
    converter.convert()
    converter.build(lambda: iter([[x]]))
    converter.save(str(tmp_path / "saved"))
    assert b"WorkbenchOrtEngine" not in (tmp_path / "saved" / "saved_model.pb").read_bytes()
    reloaded = workbench.load(tmp_path / "saved")
    reloaded(x)
    reloaded(x)
    assert counts(reloaded)[1] > 0  # the reloaded model's calls are compiled again


# --- the library: compiled once, cached, or the Python path -------------------------------

SCRIPT = """
import json, logging, sys
import numpy as np
import sample_models
from workbench import trt_convert as trt
from workbench.engines.runtime.native_op import library
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
x = sample_models.data("quickstart_mlp")["x_test"][:8]
converter = trt.TrtGraphConverterV2(
    input_saved_model_dir=str(sample_models.build("quickstart_mlp")))
model = converter.convert()
converter.build(lambda: iter([[x]]))
out = np.asarray(model(x)["logits"])
want = converter.session.loaded(x)["logits"].numpy()
(op,) = model.ops.values()
print(json.dumps({"compiled_calls": op.stats.compiled_calls, "engine_calls":
                  op.stats.engine_calls, "error": float(np.abs(out - want).max()),
                  "status": library.status()}))
"""


def run_script(cache_dir: str, compiler: str) -> tuple[dict[str, Any], str]:
    env = {**os.environ, "WORKBENCH_CACHE_DIR": cache_dir,
           environment.CXX.name: compiler, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop(environment.ENGINE_CALLS.name, None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_a_missing_compiler_leaves_engine_calls_on_the_python_path(tmp_path: Path) -> None:
    result, log = run_script(str(tmp_path), "/nonexistent/g++")
    assert result["compiled_calls"] == 0 and result["engine_calls"] == 1
    assert result["error"] < 1e-5
    path, reason = result["status"]
    assert path == "python" and "compiler '/nonexistent/g++' not found" in reason
    warnings = [line for line in log.splitlines() if "engine calls use the Python path" in line]
    assert len(warnings) == 1


def test_the_compiled_library_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    # This process compiled (or found) the library in the tests' cache directory; another
    # process whose compiler does not exist still runs compiled: it did not compile.
    monkeypatch.delenv(environment.ENGINE_CALLS.name, raising=False)
    assert native_library.load() is not None
    cached = native_library.library_file()
    assert cached.exists() and cached.parent == Path(os.environ["WORKBENCH_CACHE_DIR"])
    result, _ = run_script(os.environ["WORKBENCH_CACHE_DIR"], "/nonexistent/g++")
    assert result["compiled_calls"] == result["engine_calls"] == 1
    assert result["status"][0] == "compiled op"


def test_a_damaged_cached_library_is_compiled_again(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path))
    damaged = native_library.library_file()
    damaged.write_bytes(b"not a shared library")
    result, _ = run_script(str(tmp_path), "g++")
    assert result["compiled_calls"] == result["engine_calls"] == 1
    assert damaged.read_bytes()[:4] == b"\x7fELF"
