"""Shared fixtures: tiny models written to disk once per test session."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import workbench  # noqa: F401  (before any test imports TensorFlow: the environment it needs, lazy.py)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The suite (and the processes it starts) never reads or writes the user's prepared-graph cache.
os.environ["WORKBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="workbench-test-cache-")
atexit.register(shutil.rmtree, os.environ["WORKBENCH_CACHE_DIR"], True)
REPO = Path(__file__).resolve().parent.parent


def _tiny_module():
    import tensorflow as tf

    class Tiny(tf.Module):
        def __init__(self):
            super().__init__()
            rng = tf.random.Generator.from_seed(1)
            self.w = tf.Variable(rng.normal([4, 3]), name="w")
            self.b = tf.Variable(tf.zeros([3]), name="b")

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            h = tf.nn.relu(tf.matmul(x, self.w) + self.b)
            return {"y": tf.nn.softmax(h)}

    return Tiny()


@pytest.fixture(scope="session")
def tiny_saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SavedModel with variables, signature `serving_default` and an extra `other`."""
    import tensorflow as tf

    module = _tiny_module()
    path = tmp_path_factory.mktemp("models") / "tiny"
    tf.saved_model.save(
        module, str(path), signatures={"serving_default": module.serve, "other": module.serve}
    )
    return path


@pytest.fixture(scope="session")
def tiny_frozen_pb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model frozen into a GraphDef `.pb` (the TF1 workflow), output node `y`."""
    import tensorflow as tf
    from tensorflow.python.framework import convert_to_constants

    module = _tiny_module()

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def forward(x):
        return tf.identity(module.serve(x)["y"], name="y")

    frozen = convert_to_constants.convert_variables_to_constants_v2(
        forward.get_concrete_function()
    )
    path = tmp_path_factory.mktemp("frozen") / "tiny.pb"
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    return path


@pytest.fixture(scope="session")
def tensorrt_error():
    """A function: (FP32 ONNX model, precision, optimization profile) -> "" when TensorRT-RTX
    parses it into a strongly typed network at that precision and builds a plan, else
    TensorRT's error (`tensorrt_verdict`, uncached; the builder runs without a GPU)."""
    pytest.importorskip(
        "tensorrt_rtx", reason="tensorrt_rtx is not installed (pip install tensorrt-rtx)")
    from workbench.engines.inspection.tensorrt_verdict import tensorrt_verdict
    from workbench.engines.settings import BuildRequest

    def build(model, precision: str, profile) -> str:
        verdict = tensorrt_verdict(model, precision, BuildRequest(profiles=(profile,)),
                                   use_cache=False)
        return "" if verdict.built else verdict.error or "no plan"

    return build


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs `workbench ...` as a user would, in a fresh process: without TF_CPP_MIN_LOG_LEVEL
    (unless `env` sets it), so TensorFlow's start-up chatter is ours to keep off stderr."""
    return subprocess.run(
        [sys.executable, "-m", "workbench.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=user_environment(env),
        timeout=600,
    )


def user_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the TF_CPP_MIN_LOG_LEVEL the suite sets, plus `extra`."""
    base = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return {**base, **(extra or {})}


# TensorFlow prints its oneDNN notice at import on any x86 CPU with this, not only on those
# (AVX-512) where oneDNN is on by default: tests of a clean stderr use it so they test on any CPU.
NOISY_TENSORFLOW = {"TF_ENABLE_ONEDNN_OPTS": "1"}


def fixture_path(name: str = "") -> Path:
    """A trtexec fixture folder (shared/, beside the repo); skipped locally when the fixtures
    are absent, failed on CI, where they must be."""
    from workbench.profiling.trtexec import fixtures_dir

    root = fixtures_dir()
    if root is None:
        reason = ("trtexec fixtures not found at ../shared/fixtures/trtexec "
                  "(set WORKBENCH_TRTEXEC_FIXTURES)")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return root / name


def pytest_report_header(config: pytest.Config) -> str:
    """CI runs the suite on two stacks: the header says which one this is."""
    from importlib import metadata

    from workbench.tf_compat import tensorflow_version

    return (f"TensorFlow {tensorflow_version()}, numpy {metadata.version('numpy')}, "
            f"onnxruntime {metadata.version('onnxruntime')}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On TensorFlow <= 2.17 (CI's second environment, TensorFlow 2.17.1): tests marked
    `newest_stack(reason)` skip, saying why; so do tests marked `stack_independent(reason)`
    when SKIP_STACK_INDEPENDENT=1 (.ci/run sets it there: CI has run them on TensorFlow 2.21)."""
    from workbench.tf_compat import LAST_TFTRT_RELEASE, tensorflow_release, tensorflow_version

    if tensorflow_release() > LAST_TFTRT_RELEASE:
        return
    skipped = {"newest_stack": f"needs TensorFlow >= 2.18, this is {tensorflow_version()}"}
    if os.environ.get("SKIP_STACK_INDEPENDENT") == "1":
        skipped["stack_independent"] = ("stack-independent, SKIP_STACK_INDEPENDENT=1 leaves it to "
                                         "the newer stack's run")
    for item in items:
        for name, why in skipped.items():
            marker = item.get_closest_marker(name)
            if marker is not None:
                reason = marker.kwargs.get("reason") or ", ".join(marker.args)
                item.add_marker(pytest.mark.skip(reason=f"{why}: {reason}"))
