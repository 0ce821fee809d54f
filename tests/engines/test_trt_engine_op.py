"""Saved converted models hold TF-TRT's TRTEngineOp nodes, which the workbench registers
(workbench/engines/runtime/native_op/trt_engine_op.py and trt_engine_op.cc).

What TF-TRT's own API tests check of a saved model, checked here our way: plain
`tf.saved_model.load` in a new process that imported the workbench finds one TRTEngineOp per
engine (with TF-TRT's attributes, `calibration_data` after INT8 calibration) and runs it; a
process without the workbench refuses it as it refused TF-TRT's; `strip-engines` writes it
loadable without the workbench; where the op cannot be compiled, saving says why and keeps the
engines as plain calls of their native segments.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import user_environment

from workbench.engines.runtime.native_op.trt_engine_op import (
    register_engine_op,
    unavailable_reason,
)
from workbench.engines.tftrt.strip import strip_engines

X = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)

# Loads a saved model with plain TensorFlow in a fresh process and prints its engine nodes
# and outputs as JSON; the first argument says whether to import the workbench first.
LOAD = """
import json, sys
import numpy as np
if sys.argv[1] == "workbench":
    import workbench
import tensorflow as tf
signature = tf.saved_model.load(sys.argv[2]).signatures["serving_default"]
graph = signature.graph.as_graph_def()
nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
engines = {n.name: {"segment_func": n.attr["segment_func"].func.name,
                    "precision_mode": n.attr["precision_mode"].s.decode(),
                    "calibration_data": len(n.attr["calibration_data"].s)}
           for n in nodes if n.op == "TRTEngineOp"}
outputs = signature(x=tf.constant(np.load(sys.argv[3])))
print(json.dumps({"engines": engines,
                  "outputs": {k: v.numpy().tolist() for k, v in outputs.items()}}))
"""


def _module():
    import tensorflow as tf

    rng = np.random.default_rng(0)

    class Model(tf.Module):
        def __init__(self) -> None:
            self.w = tf.Variable(rng.standard_normal((4, 6)).astype(np.float32))
            self.b = tf.Variable(rng.standard_normal(6).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            hidden = tf.nn.relu(tf.matmul(x, self.w) + self.b)
            return {"y": tf.nn.softmax(hidden * 2.0), "rows": tf.shape(hidden)[0]}

    return Model()


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    import tensorflow as tf

    path = tmp_path_factory.mktemp("engine_op") / "source"
    model = _module()
    tf.saved_model.save(model, str(path), signatures={"serving_default": model.serve})
    return path


def _converted(source: Path, out: Path, **params) -> dict[str, np.ndarray]:
    """Converts, builds and saves `source` into `out`; the converted model's outputs on X."""
    from workbench import trt_convert as trt

    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(source),
                                        minimum_segment_size=2, **params)
    calibration = (lambda: iter([(X,)])) if params.get("precision_mode") == "INT8" else None
    converted = converter.convert(calibration_input_fn=calibration)
    converter.build(lambda: iter([(X,)]))
    converter.save(str(out))
    return {k: np.asarray(v) for k, v in converted(x=X).items()}


def _load(path: Path, with_workbench: bool, env: dict | None = None
          ) -> subprocess.CompletedProcess:
    inputs = path.parent / "x.npy"
    np.save(inputs, X)
    return subprocess.run(
        [sys.executable, "-c", LOAD, "workbench" if with_workbench else "plain", str(path),
         str(inputs)],
        capture_output=True, text=True, timeout=300, env=user_environment(env))


def _loaded(path: Path) -> dict:
    done = _load(path, with_workbench=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_op_compiles_here() -> None:
    """CI has a compiler: every test below must see TF-TRT's layout, not the fallback."""
    assert register_engine_op(), unavailable_reason()


def test_saved_engines_are_tftrt_engine_ops_that_plain_tensorflow_runs(source, tmp_path
                                                                        ) -> None:
    out = tmp_path / "converted"
    expected = _converted(source, out, use_dynamic_shape=True)
    loaded = _loaded(out)
    [(name, engine)] = loaded["engines"].items()
    assert name == "TRTEngineOp_000_000"
    # TensorFlow's loader renames every function it loads: __inference_<name>_<n>.
    assert "TRTEngineOp_000_000_native_segment" in engine["segment_func"]
    assert (engine["precision_mode"], engine["calibration_data"]) == ("FP32", 0)
    np.testing.assert_allclose(loaded["outputs"]["y"], expected["y"], rtol=1e-5, atol=1e-6)
    assert loaded["outputs"]["rows"] == len(X)

    refused = _load(out, with_workbench=False)
    assert refused.returncode != 0
    assert "Op type not registered 'TRTEngineOp'" in refused.stderr

    assert strip_engines(out, tmp_path / "servable").engines == ("TRTEngineOp_000_000",)
    done = _load(tmp_path / "servable", with_workbench=False)
    assert done.returncode == 0, done.stderr[-2000:]
    plain = json.loads(done.stdout.strip().splitlines()[-1])
    assert plain["engines"] == {}
    np.testing.assert_allclose(plain["outputs"]["y"], expected["y"], rtol=1e-5, atol=1e-6)


def _engine_nodes(signature) -> list:
    graph = signature.graph.as_graph_def()
    return [n for n in [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
            if n.op == "TRTEngineOp"]


def test_int8_engine_op_keeps_its_calibration_and_refuses_when_native_is_disallowed(
        source, tmp_path, monkeypatch) -> None:
    import tensorflow as tf

    out = tmp_path / "int8"
    _converted(source, out, precision_mode="INT8", use_dynamic_shape=True)
    signature = tf.saved_model.load(str(out)).signatures["serving_default"]
    [engine] = _engine_nodes(signature)
    assert engine.attr["precision_mode"].s == b"INT8"
    assert engine.attr["calibration_data"].s.startswith(b"TRT-workbench-MinMaxCalibration")
    signature(x=tf.constant(X))  # runs natively
    # As TF-TRT's kernel: without an engine, the native segment runs only where allowed.
    monkeypatch.setenv("TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION", "False")
    with pytest.raises(tf.errors.AbortedError,
                       match="User disallowed engine native segment execution"):
        signature(x=tf.constant(X))


SAVE_WITHOUT_COMPILER = """
import logging, sys
logging.basicConfig(level=logging.WARNING, format="%(message)s")
import numpy as np
from workbench import trt_convert as trt
converter = trt.TrtGraphConverterV2(input_saved_model_dir=sys.argv[1], minimum_segment_size=2)
converter.convert()
converter.save(sys.argv[2])
"""


def test_without_a_compiler_engines_stay_calls_of_their_native_segments(source, tmp_path
                                                                         ) -> None:
    out = tmp_path / "converted"
    env = {"WORKBENCH_CXX": str(tmp_path / "no-such-compiler"),
           "WORKBENCH_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", SAVE_WITHOUT_COMPILER, str(source), str(out)],
                          capture_output=True, text=True, timeout=300, env=user_environment(env))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TRTEngineOp is not available in this process (compiler" in done.stderr
    loaded = _load(out, with_workbench=False)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert json.loads(loaded.stdout.strip().splitlines()[-1])["engines"] == {}


def test_a_call_of_types_tftrts_op_refuses_stays_a_call() -> None:
    """TF-TRT's TRTEngineOp declared its input and output types; a saved graph imports only
    nodes that keep to them, so another engine call stays the plain call it was."""
    from tensorflow.core.framework import graph_pb2, types_pb2

    from workbench.conversion.result import EngineInfo
    from workbench.engines.runtime.tftrt_graph_def import as_engine_nodes

    graph = graph_pb2.GraphDef()
    for name, dtype in (("TRTEngineOp_000_000", types_pb2.DT_FLOAT),
                        ("TRTEngineOp_000_001", types_pb2.DT_INT64)):
        call = graph.node.add(name=name, op="PartitionedCall")
        call.attr["Tin"].list.type.append(dtype)
        call.attr["Tout"].list.type.append(types_pb2.DT_FLOAT)
        call.attr["f"].func.name = f"{name}_native_segment"
    infos = {n.name: EngineInfo(name=n.name, nodes=(), native_ops={}, native_node_count=0,
                                effective_size=0, input_dtypes=(), output_dtypes=(),
                                input_shapes=(), output_shapes=(), inputs=(), outputs=(),
                                device="/device:GPU:0") for n in graph.node}
    as_engine_nodes(graph, infos, lambda name: {"precision_mode": "FP32"}, to_run=True)
    assert [(n.op, n.device) for n in graph.node] == [("TRTEngineOp", ""),
                                                      ("PartitionedCall", "")]
