"""Engine calls: what one engine call costs in the converted model, and what that costs models.

1. Per-call overhead: a chain of ENGINES tiny engines (y = relu(2x + 1), each cut off by a
   FloorMod TF-TRT does not convert) against the same graph in native TensorFlow, called
   through the converted graph with every engine's native fallback `cond`, and with built
   engines called without it (what the converted model runs), each call through Python (a
   `numpy_function`, `WORKBENCH_ENGINE_CALLS=python`) and through the compiled engine op.
   Printed in ms per engine call.
2. `digits_cnn` and EfficientNetB0 (keras.applications, weights=None), converted (FP32,
   implicit batch) against native TensorFlow at batch 1, as ratios measured in the same run,
   with the engine calls through Python and through the compiled op.

    .venv/bin/python benchmarks/engine_calls.py [--quick]

Rounds alternate between the variants and the median of rounds is printed, since the machine
is shared. Every figure names its backend and device.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import record  # noqa: E402

import sample_models  # noqa: E402
from workbench import trt_convert as trt  # noqa: E402
from workbench.environment import ENGINE_CALLS  # noqa: E402
from workbench.hardware import cpu_device_name  # noqa: E402

ENGINES = 8
TARGET_MS = 0.05  # the per-call target


def per_call_ms(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def compare(variants: dict[str, Callable[[], Any]], calls: int, rounds: int) -> dict[str, float]:
    """Median ms per call of each variant over alternating rounds (after a warm-up)."""
    for fn in variants.values():
        per_call_ms(fn, max(calls // 10, 3))
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            times[name].append(per_call_ms(fn, calls))
    return {name: statistics.median(t) for name, t in times.items()}


def chain_model(directory: str, engines: int) -> None:
    import tensorflow as tf

    class Chain(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 16], tf.float32)])
        def __call__(self, x: Any) -> dict[str, Any]:
            for _ in range(engines):
                x = tf.math.floormod(tf.nn.relu(x * 2.0 + 1.0), 7.0)
            return {"y": x}

    chain = Chain()
    tf.saved_model.save(chain, directory, signatures=chain.__call__)


def efficientnet_model(directory: str) -> None:
    import keras
    import tensorflow as tf

    net = keras.applications.EfficientNetB0(weights=None, input_shape=(224, 224, 3))
    owner = tf.Module()
    owner.model_variables = list(net.variables)  # only the variables, as sample models do

    @tf.function(input_signature=[tf.TensorSpec([None, 224, 224, 3], tf.float32, name="x")])
    def serve(x: Any) -> dict[str, Any]:
        return {"probs": net(x, training=False)}

    tf.saved_model.save(owner, directory, signatures={"serving_default": serve})


def converted(directory: str, inputs: dict[str, np.ndarray], python: bool = False,
              **params: Any) -> tuple[Any, Any]:
    """The converted model (its engines built for `inputs`, its engine calls through Python or
    the compiled op) and the native signature."""
    import tensorflow as tf

    previous = os.environ.pop(ENGINE_CALLS.name, None)
    if python:
        os.environ[ENGINE_CALLS.name] = "python"
    try:
        converter = trt.TrtGraphConverterV2(input_saved_model_dir=directory, **params)
        model = converter.convert()
        converter.build(lambda: iter([inputs]))
        assert model.function is not None  # the call graph, made with the setting above
    finally:
        os.environ.pop(ENGINE_CALLS.name, None)
        if previous is not None:
            os.environ[ENGINE_CALLS.name] = previous
    native = tf.saved_model.load(directory).signatures["serving_default"]
    return model, native


def compiled_share(model: Any) -> str:
    stats = [op.stats for op in model.ops.values()]
    return f"{sum(s.compiled_calls for s in stats)}/{sum(s.engine_calls for s in stats)}"


def blocking(fn: Callable[..., dict[str, Any]], tensors: dict[str, Any]) -> Callable[[], Any]:
    return lambda: [np.asarray(v) for v in fn(**tensors).values()]


def check_equal(model: Any, native: Any, tensors: dict[str, Any], atol: float) -> None:
    got, want = blocking(model, tensors)(), blocking(native, tensors)()
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, atol=atol, rtol=1e-4)


def engine_calls_per_model_call(model: Any, work: Callable[[], Any]) -> int:
    before = sum(op.stats.engine_calls for op in model.ops.values())
    work()
    return sum(op.stats.engine_calls for op in model.ops.values()) - before


def overhead_section(calls: int, rounds: int, label: str) -> dict[str, Any]:
    import tensorflow as tf

    with tempfile.TemporaryDirectory(prefix="engine-calls-") as tmp:
        chain_model(tmp, ENGINES)
        x = tf.constant(np.random.default_rng(0).random((1, 16), np.float32))
        python, native = converted(tmp, {"x": x.numpy()}, python=True, minimum_segment_size=1)
        compiled, _ = converted(tmp, {"x": x.numpy()}, minimum_segment_size=1)
        for model in (python, compiled):
            check_equal(model, native, {"x": x}, 1e-5)
        engines = len(compiled.ops)
        with_fallback = python.converted_functions.every_engine_with_fallback()
        ms = compare({
            "native": blocking(native, {"x": x}),
            "with fallback cond": lambda: [t.numpy() for t in with_fallback(x)],
            "Python call, no cond": lambda: [t.numpy() for t in python.function(x)],
            "compiled op, no cond": lambda: [t.numpy() for t in compiled.function(x)],
            "converted model, Python": blocking(python, {"x": x}),
            "converted model, compiled": blocking(compiled, {"x": x}),
        }, calls, rounds)
    print(f"\n1. Per engine call: {engines} tiny engines at batch 1, {label}")
    print(f"   native TensorFlow              {ms['native']:.3f} ms per model call")
    per = {}
    for name in list(ms)[1:]:
        per[name] = (ms[name] - ms["native"]) / engines
        print(f"   {name:<30} {ms[name]:.3f} ms per model call, "
              f"{per[name]:.4f} ms per engine call")
    print(f"   compiled op calls: {compiled_share(compiled)} of the engine calls")
    after = per["converted model, compiled"]
    verdict = "OK" if after <= TARGET_MS else "MISSED"
    print(f"   target <= {TARGET_MS} ms per engine call (converted model, compiled op): "
          f"{verdict} ({after:.4f}; through Python {per['converted model, Python']:.4f})")
    return record.figure(
        "per engine call in the converted model (8 tiny engines, batch 1): compiled op",
        f"{after:.4f} ms (through Python {per['converted model, Python']:.4f} ms)",
        f"<= {TARGET_MS} ms", after <= TARGET_MS)


def model_section(title: str, directory: str, inputs: dict[str, np.ndarray], calls: int,
                  rounds: int, label: str) -> dict[str, Any]:
    import tensorflow as tf

    start = time.perf_counter()
    compiled, native = converted(directory, inputs)
    build = time.perf_counter() - start
    python, _ = converted(directory, inputs, python=True)
    tensors = {k: tf.convert_to_tensor(v) for k, v in inputs.items()}
    for model in (compiled, python):
        check_equal(model, native, tensors, 1e-3)
    run_compiled = blocking(compiled, tensors)
    per_call = engine_calls_per_model_call(compiled, run_compiled)
    ms = compare({"native": blocking(native, tensors), "compiled": run_compiled,
                  "python": blocking(python, tensors)}, calls, rounds)
    ratio = ms["native"] / ms["compiled"]
    print(f"\n{title} at batch 1, FP32, {label} (convert + build {build:.1f} s)")
    print(f"   native TensorFlow {ms['native']:.2f} ms; converted {ms['compiled']:.2f} ms with "
          f"the compiled op, {ms['python']:.2f} ms through Python ({len(compiled.ops)} engines, "
          f"{per_call} engine calls per model call, compiled op calls "
          f"{compiled_share(compiled)})")
    print(f"   speed-up native/converted {ratio:.2f}x: "
          f"{'OK' if ratio >= 1.0 else 'MISSED'} (target >= 1.0; through Python "
          f"{ms['native'] / ms['python']:.2f}x)")
    return record.figure(
        f"{title.split('. ', 1)[-1]} at batch 1: native TF / converted (compiled op)",
        f"{ratio:.2f}x ({ms['native']:.2f} / {ms['compiled']:.2f} ms; through Python "
        f"{ms['native'] / ms['python']:.2f}x)", ">= 1.0x", ratio >= 1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    args = parser.parse_args(argv)
    calls, rounds = (200, 3) if args.quick else (1000, 5)
    label = f"converted engines on onnxruntime, {cpu_device_name()}"
    figures = [overhead_section(calls, rounds, label)]
    data = sample_models.data("digits_cnn")
    figures += [model_section("2. digits_cnn", str(sample_models.build("digits_cnn")),
                  {"images": data["x_test"][:1]}, calls, rounds, label)]
    with tempfile.TemporaryDirectory(prefix="efficientnet-") as tmp:
        efficientnet_model(tmp)
        image = np.random.default_rng(0).random((1, 224, 224, 3), np.float32) * 255
        figures.append(model_section("3. EfficientNetB0", str(Path(tmp)), {"x": image},
                                     max(calls // 20, 10), rounds, label))
    record.write("engine_calls", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
