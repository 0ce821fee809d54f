"""Control flow and functions x every preparation target x batch mode x precision, converted
and reloaded, each compared with native TensorFlow value by value.

A cond prepared for the default T4 once returned a float32 `[0]` without a word: the layout
optimizer's shared permutation Const had joined both branches in one engine. Tiny models, so
the 8 samples x 4 targets x 4 settings run in minutes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import sample_models
from workbench.checks.validation import compare_outputs, with_default_tolerances
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.engines.runtime.converted_model import converted_model
from workbench.engines.runtime.saving import load_converted, save_converted

pytestmark = pytest.mark.slow

# Every target `prepare_for` offers a kind of: the CPU, the default T4 (sm_75, NCHW layout),
# an sm_80 and an sm_90 GPU (NHWC kept).
TARGETS = ("cpu", "T4", "A100", "H100")
SETTINGS = [(mode, precision) for mode in ("implicit", "dynamic") for precision in
            ("FP32", "FP16")]
SIDE = 8


class Conv(tf.Module):
    """One seeded 3x3 convolution, 3 -> `filters` channels."""

    def __init__(self, filters: int = 4, seed: int = 0):
        super().__init__()
        rng = tf.random.Generator.from_seed(seed)
        self.kernel = tf.Variable(rng.normal([3, 3, 3, filters]) * 0.3)
        self.bias = tf.Variable(rng.normal([filters]) * 0.1)

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return tf.nn.bias_add(tf.nn.conv2d(x, self.kernel, 1, "SAME"), self.bias)


IMAGES = tf.TensorSpec([None, SIDE, SIDE, 3], tf.float32, name="x")


def _module(serve: Callable[[Any, tf.Tensor], dict[str, tf.Tensor]],
            spec: tf.TensorSpec = IMAGES) -> tf.Module:
    module = tf.Module()
    module.conv = Conv()
    module.same = Conv(3, seed=1)
    module.w = tf.Variable(tf.random.Generator.from_seed(2).normal([1, 4]))
    module.serve = tf.function(lambda x: serve(module, x), input_signature=[spec])
    return module


def _cond(m: Any, x: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(tf.cond(tf.reduce_sum(x) > 0, lambda: m.conv(x) * 2,
                              lambda: m.conv(x) - 1)) + 1


def _switch_case(m: Any, x: tf.Tensor) -> dict[str, tf.Tensor]:
    index = tf.cast(tf.reduce_sum(x) > 0, tf.int32)
    branches = [lambda: m.conv(x) * 2, lambda: m.conv(x) - 1, lambda: m.conv(x)]
    return {"out": tf.nn.relu(tf.switch_case(index, branches)) + 1}


def _while(m: Any, x: tf.Tensor) -> dict[str, tf.Tensor]:
    _, h = tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.nn.relu(m.same(h))),
                         (tf.constant(0), x))
    return {"out": h}


def _map_fn(m: Any, x: tf.Tensor) -> dict[str, tf.Tensor]:
    return {"out": tf.map_fn(lambda image: tf.nn.relu(m.conv(image[None]))[0], x)}


def _nested(m: Any, x: tf.Tensor) -> dict[str, tf.Tensor]:
    @tf.function
    def block(h: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(m.same(h))

    @tf.function
    def twice(h: tf.Tensor) -> tf.Tensor:
        return block(block(h)) + h

    return {"out": m.conv(twice(x))}


def _strings(m: Any, x: tf.Tensor) -> dict[str, tf.Tensor]:
    numbers = tf.reshape(tf.strings.to_number(x), [-1, 1])
    return {"out": tf.nn.relu(tf.matmul(numbers, m.w) + 0.5) * 2}


def _cond_two_outputs(m: Any, x: tf.Tensor) -> dict[str, tf.Tensor]:
    picked = _cond(m, x)
    return {"maps": picked, "pooled": tf.reduce_mean(tf.nn.relu(picked * 3), axis=[1, 2])}


SAMPLES: dict[str, tuple[Callable, tf.TensorSpec]] = {
    "cond": (lambda m, x: {"out": _cond(m, x)}, IMAGES),
    "switch_case": (_switch_case, IMAGES),
    "while": (_while, IMAGES),
    "map_fn": (_map_fn, IMAGES),
    "nested_functions": (_nested, IMAGES),
    "string_input": (_strings, tf.TensorSpec([None], tf.string, name="x")),
    "cond_two_outputs": (_cond_two_outputs, IMAGES),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("control_flow_matrix")
    paths = {"lstm": sample_models.build("lstm")}
    for name, (serve, spec) in SAMPLES.items():
        module = _module(serve, spec)
        tf.saved_model.save(module, str(root / name), signatures=module.serve)
        paths[name] = root / name
    return paths


def input_sets(session: ConversionSession) -> list[dict[str, np.ndarray]]:
    """Two batches; for images one positive and one negative, so each cond branch runs."""
    (name,) = session.loaded.input_names
    spec = session.prepared().optimized.input_specs[0]
    rng = np.random.default_rng(0)
    if spec.dtype == tf.string:
        return [{name: np.array([b"1.5", b"-2", b"0.25"])}, {name: np.array([b"3"] * 2)}]
    shape = [3 if d is None else d for d in spec.shape]
    x = np.abs(rng.normal(size=shape)).astype(np.float32) + 0.1
    return [{name: x}, {name: -x[:2]}]


def assert_matches(model: Any, native: Any, feeds: list[dict[str, np.ndarray]],
                   precision: str, what: str) -> None:
    tolerances, _ = with_default_tolerances(precision, {})
    for batch in feeds:
        expected = {k: v.numpy() for k, v in native(**batch).items()}
        actual = {k: v.numpy() for k, v in model(**batch).items()}
        for result in compare_outputs(expected, actual, **tolerances):
            assert result.passed, f"{what}: {result}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("sample", [*SAMPLES, "lstm"])
def test_converted_and_reloaded_models_match_native_tensorflow(
        saved: dict[str, Path], sample: str, target: str, tmp_path: Path) -> None:
    session = ConversionSession.open(saved[sample], prepare_for=target)
    feeds = input_sets(session)
    for mode, precision in SETTINGS:
        params = ConversionParams(precision_mode=precision, minimum_segment_size=2,
                                  use_dynamic_shape=mode == "dynamic")
        model = converted_model(session, session.convert(params), params)
        what = f"{sample} prepared for {target}, {mode} batch, {precision}"
        assert_matches(model, session.loaded, feeds, precision, what)
        directory = tmp_path / f"{mode}-{precision}"
        save_converted(model, directory)
        assert_matches(load_converted(directory), session.loaded, feeds, precision,
                       what + ", reloaded")
