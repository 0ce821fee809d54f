"""Every call of a converted or reloaded model checks its outputs against the signature's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import workbench
from workbench import trt_convert as trt
from workbench.engines.runtime.output_check import OutputSpec, WrongOutputError

X = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")


@pytest.fixture(autouse=True)
def python_engine_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engines called from Python (not the compiled op), so a test can change what they
    return."""
    monkeypatch.setenv("WORKBENCH_ENGINE_CALLS", "python")


def converted(model_dir: Path, **params: Any) -> Any:
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(model_dir),
        conversion_params=trt.TrtConversionParams(minimum_segment_size=1, **params))
    return converter, converter.convert()


def truncate_engine_outputs(model: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Makes every built engine of `model` drop its last output column: a wrong shape."""
    names = []
    for name, op in model.ops.items():
        for _, engine in op.engines():
            real_run = engine.run
            monkeypatch.setattr(engine, "run",
                                lambda arrays, run=real_run: [o[..., :-1] for o in run(arrays)])
            names.append(name)
    assert names, "no engine was built"
    return names[-1]


def test_an_engine_returning_a_wrong_shape_raises_naming_output_engine_and_target(
        tiny_saved_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, model = converted(tiny_saved_model)
    assert model(X)["y"].shape == (5, 3)
    engine = truncate_engine_outputs(model, monkeypatch)
    with pytest.raises(WrongOutputError) as caught:
        model(X)
    message = str(caught.value)
    assert "'y'" in message and f"engine {engine}" in message
    assert "shape [5, 2], the signature's is [None, 3]" in message
    assert "NVIDIA T4 (sm_75)" in message
    with pytest.raises(WrongOutputError):  # the engine-by-engine path checks too
        model.call_with_engines(set(model.ops), x=X)


def test_a_reloaded_model_checks_its_outputs_too(
        tiny_saved_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    converter, model = converted(tiny_saved_model, precision_mode="FP16")
    model(X)
    converter.save(str(tmp_path / "saved"))
    reloaded = workbench.load(tmp_path / "saved")
    np.testing.assert_allclose(reloaded(X)["y"], model(X)["y"])
    assert reloaded.graph.output_specs == model.graph.output_specs
    assert reloaded.graph.output_specs[0].shape[-1] == 3
    engine = truncate_engine_outputs(reloaded, monkeypatch)
    with pytest.raises(WrongOutputError, match=f"'y', made by engine {engine}.*NVIDIA T4"):
        reloaded(X)


def test_output_spec_checks_dtype_rank_and_every_known_dimension() -> None:
    spec = OutputSpec("out", "float32", (-1, 32, 8))
    assert spec.mismatch(tf.zeros([2, 32, 8])) == ""
    assert spec.mismatch(tf.zeros([0])) == "shape [0], the signature's is [None, 32, 8]"
    assert "shape [2, 32, 7]" in spec.mismatch(tf.zeros([2, 32, 7]))
    assert spec.mismatch(tf.zeros([2, 32, 8], tf.float16)) == \
        "dtype float16, the signature's is float32"
    assert OutputSpec("s", "string", (-1,)).mismatch(tf.constant(["a"])) == ""
    assert OutputSpec("any", "", None).mismatch(tf.zeros([0])) == ""
