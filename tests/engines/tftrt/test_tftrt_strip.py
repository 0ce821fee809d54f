"""strip_engines: a SavedModel TF-TRT wrote, served again by today's TensorFlow.

TF-TRT cannot run here, so the test writes its format: a model saved by TensorFlow with TF-TRT's
structure (a converted function calling the native segment, one `_TRTEngineResource` per engine
with its serialized-engine asset), whose protos are then rewritten into TF-TRT's ops: the call
becomes a TRTEngineOp with TF-TRT's attributes, the resource's stand-in ops become
CreateTRTResourceHandle and InitializeTRTResource. Plain TensorFlow refuses that model, as it
refuses one TF-TRT 2.17 wrote.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli
from test_tftrt_saved_model import _out_tensor, _to_engine_op, converted  # noqa: F401 (fixture)

from workbench.engines.tftrt.saved_model import TftrtModelError
from workbench.engines.tftrt.strip import TFTRT_OPS, strip_engines

ENGINE = "TRTEngineOp_000_000"
SEGMENT = f"{ENGINE}_native_segment"
X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)


def _engine_resource_class():
    from tensorflow.python.trackable import asset, resource

    class EngineResource(resource.TrackableResource):
        """TF-TRT 2.17's `_TRTEngineResource`, with ops TF 2.21 has standing in for
        CreateTRTResourceHandle and InitializeTRTResource (rewritten in the protos)."""

        def __init__(self, name: str, filename: str, maximum_cached_engines: int) -> None:
            super().__init__(device="GPU")
            self._resource_name = name
            self._filename = self._track_trackable(asset.Asset(filename),
                                                   "_serialized_trt_resource_filename")
            self._maximum_cached_engines = maximum_cached_engines

        def _create_resource(self):
            import tensorflow as tf

            return tf.raw_ops.VarHandleOp(dtype=tf.int32, shape=[],
                                          shared_name=self._resource_name)

        def _initialize(self) -> None:
            import tensorflow as tf

            tf.raw_ops.AssignVariableOp(resource=self.resource_handle,
                                        value=tf.strings.length(self._filename))

    return EngineResource


def write_tftrt_model(path: Path) -> object:
    """A TF-TRT style SavedModel at `path`; returns the native function it computes."""
    import tensorflow as tf

    rng = np.random.default_rng(1)
    weights = tf.constant(rng.standard_normal((4, 5)).astype(np.float32))
    bias = tf.constant(rng.standard_normal(5).astype(np.float32))

    @tf.function
    def segment(x):
        return tf.nn.relu(tf.matmul(x, weights) + bias)

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def serve(x):
        return {"y": segment(x) * 2.0}

    plan = path.parent / f"trt-serialized-engine.{ENGINE}"
    plan.write_bytes(b"a TensorRT plan")
    root = tf.Module()
    root.trt_engine_resources = {ENGINE: _engine_resource_class()(ENGINE, str(plan), 1)}
    tf.saved_model.save(root, str(path), signatures={"serving_default": serve})
    _to_tftrt_ops(path)
    return serve


def _to_tftrt_ops(path: Path) -> None:
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((path / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].graph_def
    segment = next(f.signature.name for f in graph.library.function
                   if f.signature.name.startswith("__inference_segment_"))
    for function in graph.library.function:
        if function.signature.name == segment:
            function.signature.name = SEGMENT
        calls = [n for n in function.node_def
                 if "f" in n.attr and n.attr["f"].func.name == segment]
        for node in calls:
            old = node.name
            node.attr["f"].func.name = SEGMENT
            node.name = ENGINE
            _to_engine_op(node, {"input_shapes": {ENGINE: [[-1, 4]]}, "use_dynamic_shape": True,
                                 "precision_mode": "FP16", "maximum_cached_engines": 1})
            _rename(function, old, ENGINE)
            for other in function.node_def:
                other.input[:] = [_out_tensor(i, {ENGINE}) for i in other.input]
            for key, value in function.ret.items():
                function.ret[key] = _out_tensor(value, {ENGINE})
        _resource_ops(function.node_def, function.ret)
    _resource_ops(graph.node, None)
    (path / "saved_model.pb").write_bytes(proto.SerializeToString())


def _rename(function, old: str, new: str) -> None:
    for node in function.node_def:
        node.input[:] = [new + i[len(old):] if i.split(":")[0] == old else i for i in node.input]
    for key, value in function.ret.items():
        if value.split(":")[0] == old:
            function.ret[key] = new + value[len(old):]


def _resource_ops(nodes, ret) -> None:
    """VarHandleOp(shared_name=engine) -> CreateTRTResourceHandle(resource_name=engine);
    AssignVariableOp(handle, StringLength(filename)) -> InitializeTRTResource(handle,
    filename, max_cached_engines_count=1)."""
    by_name = {n.name: n for n in nodes}
    handles = set()
    for node in nodes:
        if node.op == "VarHandleOp" and node.attr["shared_name"].s == ENGINE.encode():
            node.op = "CreateTRTResourceHandle"
            node.attr.clear()
            node.attr["resource_name"].s = ENGINE.encode()
            handles.add(node.name)
    for node in nodes:
        node.input[:] = [i.replace(":resource:", ":resource_handle:") for i in node.input]
        if node.op == "AssignVariableOp" and node.input[0].split(":")[0] in handles:
            length = by_name[node.input[1].split(":")[0]]
            node.op = "InitializeTRTResource"
            node.input[1] = length.input[0]
            node.attr.clear()
            node.attr["max_cached_engines_count"].i = 1
    for key, value in (ret or {}).items():
        ret[key] = value.replace(":resource:", ":resource_handle:")


@pytest.fixture(scope="module")
def tftrt_model(tmp_path_factory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("tftrt") / "model"
    return path, write_tftrt_model(path)


def _ops(path: Path) -> set[str]:
    from workbench.graph.loading import read_saved_model_proto

    graph = read_saved_model_proto(path).meta_graphs[0].graph_def
    return {n.op for n in graph.node} | {n.op for f in graph.library.function
                                         for n in f.node_def}


def test_plain_tensorflow_refuses_the_tftrt_model(tftrt_model) -> None:
    """Without the workbench (a process that never imported it), as TensorFlow >= 2.18 and
    TensorFlow Serving refuse TF-TRT's models."""
    path, _ = tftrt_model
    assert {"TRTEngineOp", "CreateTRTResourceHandle", "InitializeTRTResource"} <= _ops(path)
    done = subprocess.run(
        [sys.executable, "-c", f"import tensorflow as tf; tf.saved_model.load({str(path)!r})"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert re.search("Op type not registered '(CreateTRTResourceHandle|InitializeTRTResource|"
                     "TRTEngineOp)'", done.stderr)


def test_with_the_workbench_the_tftrt_model_loads_and_runs_natively(tftrt_model) -> None:
    """The workbench registers TF-TRT's TRTEngineOp and engine-resource ops (their kernels run
    the native segment and keep no engine): the TF-TRT model loads as it is."""
    import tensorflow as tf

    from workbench.engines.runtime.native_op.trt_engine_op import register_engine_op

    path, native = tftrt_model
    assert register_engine_op()
    loaded = tf.saved_model.load(str(path))
    got = loaded.signatures["serving_default"](x=tf.constant(X))["y"]
    np.testing.assert_array_equal(got.numpy(), native(tf.constant(X))["y"].numpy())


def test_stripped_model_loads_and_serves_in_today_tensorflow(tftrt_model, tmp_path) -> None:
    import tensorflow as tf

    path, native = tftrt_model
    stripped = strip_engines(path, tmp_path / "stripped")
    assert stripped.engines == (ENGINE,)
    assert stripped.assets_removed == (f"trt-serialized-engine.{ENGINE}",)
    assert stripped.functions_removed  # the resource's creator and initializer
    assert not _ops(tmp_path / "stripped") & TFTRT_OPS
    assert not (tmp_path / "stripped" / "assets" / f"trt-serialized-engine.{ENGINE}").exists()
    loaded = tf.saved_model.load(str(tmp_path / "stripped"))
    got = loaded.signatures["serving_default"](x=tf.constant(X))["y"]
    np.testing.assert_array_equal(got.numpy(), native(tf.constant(X))["y"].numpy())


def test_stripped_model_serves_through_the_tf1_loader_like_tf_serving(tftrt_model,
                                                                      tmp_path) -> None:
    """TensorFlow Serving loads with the TF1 loader, which runs the init op: it no longer
    initializes the engine resources."""
    import tensorflow as tf

    path, native = tftrt_model
    strip_engines(path, tmp_path / "stripped")
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"],
                                                    str(tmp_path / "stripped"))
        signature = meta.signature_def["serving_default"]
        got = session.run(signature.outputs["y"].name, {signature.inputs["x"].name: X})
    # One float32 ulp apart at most: a TF1 session and a function may pick other oneDNN kernels.
    np.testing.assert_allclose(got, native(tf.constant(X))["y"].numpy(), rtol=1e-6, atol=1e-7)


def test_stripped_digits_cnn_matches_the_native_model(converted, tmp_path) -> None:  # noqa: F811
    """The TF-TRT format made from our converter's digits_cnn (tests of tftrt/saved_model): every
    engine replaced, the outputs the native model's."""
    import tensorflow as tf

    converter, path, _params, _saved = converted
    stripped = strip_engines(path, tmp_path / "stripped")
    assert set(stripped.engines) == {e.name for e in converter.result.engines}
    assert not _ops(tmp_path / "stripped") & TFTRT_OPS
    loaded = tf.saved_model.load(str(tmp_path / "stripped"))
    function = loaded.signatures["serving_default"]
    spec = function.structured_input_signature[1]
    name, tensor = next(iter(spec.items()))
    images = np.random.default_rng(2).random((2, *tensor.shape[1:]), np.float32)
    got = function(**{name: tf.constant(images, tensor.dtype)})
    want = converter.session.loaded(**{name: images})
    for key in want:
        # Float noise only: the native segments run as functions, in another op order.
        np.testing.assert_allclose(got[key].numpy(), want[key], rtol=1e-4, atol=1e-5)


def test_cli_strips_and_refuses_a_model_tftrt_did_not_convert(tftrt_model, tmp_path) -> None:
    import sample_models

    path, _ = tftrt_model
    done = run_cli("strip-engines", str(path), "-o", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "1 TRTEngineOp replaced by their native segments" in done.stdout
    plain = run_cli("strip-engines", str(sample_models.build("quickstart_mlp")), "-o",
                    str(tmp_path / "plain"))
    assert plain.returncode == 2
    assert plain.stderr.strip().endswith("not a model TF-TRT converted; nothing to strip.")
    again = run_cli("strip-engines", str(path), "-o", str(tmp_path / "out"))
    assert again.returncode == 2 and "exists and is not empty" in again.stderr


def test_strip_refuses_to_write_into_the_model(tftrt_model) -> None:
    import workbench

    assert workbench.strip_engines is strip_engines  # the Python API
    path, _ = tftrt_model
    with pytest.raises(Exception, match="the model's own directory"):
        strip_engines(path, path / "inside")
    with pytest.raises(TftrtModelError, match="No such SavedModel directory"):
        strip_engines(path / "missing", path.parent / "out")
