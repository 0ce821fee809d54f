"""Fast freezing gives the graph TensorFlow's own freezing gives: a SavedModel frozen from its
protos and checkpoint (graph/direct_freeze.py), the stand-ins through the import and Grappler
(graph/freeze.py)."""

from __future__ import annotations

import numpy as np
import pytest

import sample_models
from workbench.conversion.conversion_report import ConversionReport
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.graph import freeze
from workbench.graph.function_library import _rename_in, function_refs
from workbench.graph.loading import load_model
from workbench.graph.prepare import OptimizedGraph, fp32_shapes, optimize

SAMPLES = ("digits_cnn", "resnet50", "detector", "tiny_bert", "lstm", "gru", "map_fn_cnn",
           "png_cnn", "cond_mlp")


def _fast_and_slow(path: str) -> tuple[ConversionSession, ConversionSession]:
    """Uncached sessions on `path` with our freezing and with TensorFlow's own: `optimized` is
    `optimize(load_model(path), fast_freeze=...)`, and `_report` converts that same graph."""
    return (ConversionSession(load_model(path), cache=False, fast_freeze=True),
            ConversionSession(load_model(path), cache=False, fast_freeze=False))


def _report(session: ConversionSession) -> dict:
    return ConversionReport(session.convert(ConversionParams(minimum_segment_size=2))).to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLES)
def test_fast_freezing_prepares_tensorflows_graph(name: str) -> None:
    fast_session, slow_session = _fast_and_slow(str(sample_models.build(name)))
    fast = fast_session.optimized
    assert not fast.freeze_fallback and "tf_freeze_s" not in fast.timings  # from the protos
    assert fast_session.loaded.loader is not None  # TensorFlow's load is still to come
    slow = slow_session.optimized
    assert fast.fetches == slow.fetches
    assert [n.name for n in fast.graph_def.node] == [n.name for n in slow.graph_def.node]
    assert fast.graph_def == slow.graph_def  # ops, attrs, Const values, library
    assert fp32_shapes(fast) == fp32_shapes(slow)
    assert _report(fast_session) == _report(slow_session)


def _canonical_function_names(graph_def):  # noqa: ANN001, ANN202
    """`graph_def` with its library functions named by first use and sorted: TensorFlow's own
    freezing names them with a process-wide counter and orders the library by hash."""
    from tensorflow.core.framework import graph_pb2

    graph = graph_pb2.GraphDef()
    graph.CopyFrom(graph_def)
    renames: dict[str, str] = {}
    for value in function_refs(graph.node):
        renames.setdefault(value.name, f"function_{len(renames)}")
    for function in graph.library.function:
        renames.setdefault(function.signature.name, f"function_{len(renames)}")
    for function in graph.library.function:
        function.signature.name = renames[function.signature.name]
        _rename_in(function.node_def, renames)
    _rename_in(graph.node, renames)
    functions = sorted(graph.library.function, key=lambda f: f.signature.name)
    copies = [type(f)() for f in functions]
    for copy, function in zip(copies, functions, strict=True):
        copy.CopyFrom(function)
    del graph.library.function[:]
    graph.library.function.extend(copies)
    return graph


@pytest.mark.slow
def test_fast_freezing_of_convnext_with_its_functions(tmp_path) -> None:  # noqa: ANN001
    """Keras 3's ConvNeXt keeps 18 `_conv_xla` functions Grappler does not inline."""
    import keras
    import tensorflow as tf

    net = keras.applications.ConvNeXtTiny(weights=None)
    owner = tf.Module()
    owner.model_variables = list(net.variables)

    @tf.function(input_signature=[tf.TensorSpec([None, 224, 224, 3], tf.float32, name="x")])
    def serve(x: tf.Tensor) -> dict:
        return {"probs": net(x, training=False)}

    tf.saved_model.save(owner, str(tmp_path), signatures={"serving_default": serve})
    fast = _same_preparation(str(tmp_path))
    assert fast.graph_def.library.function  # the functions were there to compare


def _same_preparation(path: str, fallback: bool = False) -> OptimizedGraph:
    """The prepared graph of `path` from our freezing and from TensorFlow's own."""
    fast_session, slow_session = _fast_and_slow(path)
    fast, slow = fast_session.optimized, slow_session.optimized
    assert bool(fast.freeze_fallback) == fallback, fast.freeze_fallback
    assert _canonical_function_names(fast.graph_def) == _canonical_function_names(
        slow.graph_def)
    assert fp32_shapes(fast) == fp32_shapes(slow)
    assert _report(fast_session) == _report(slow_session)
    return fast


@pytest.mark.slow
def test_keras_models_saved_by_tensorflow_and_by_export(tmp_path) -> None:  # noqa: ANN001
    import keras
    import tensorflow as tf

    net = keras.applications.MobileNetV3Small(weights=None, input_shape=(96, 96, 3))
    tf.saved_model.save(net, str(tmp_path / "saved"))
    _same_preparation(str(tmp_path / "saved"))
    net.export(str(tmp_path / "exported"), verbose=False)
    _same_preparation(str(tmp_path / "exported"))


class _Loop:
    """A tf.Module whose signature reads a variable inside a while loop and uses a captured
    constant."""

    @staticmethod
    def save(path: str, custom_gradient: bool = False) -> None:
        import tensorflow as tf

        module = tf.Module()
        module.w = tf.Variable(np.random.default_rng(3).normal(size=(8, 8)).astype(np.float32))
        bias = tf.constant(np.arange(8, dtype=np.float32))

        @tf.custom_gradient
        def clip(x: tf.Tensor) -> tuple:
            return tf.clip_by_value(x, -5.0, 5.0), lambda dy: dy

        @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
        def serve(x: tf.Tensor) -> dict:
            i = tf.constant(0)
            _, y = tf.while_loop(lambda i, y: i < 3,
                                 lambda i, y: (i + 1, tf.tanh(y @ module.w + bias)), (i, x))
            return {"y": clip(y) if custom_gradient else y}

        tf.saved_model.save(module, path, signatures={"serving_default": serve})


@pytest.mark.slow
def test_a_module_with_a_variable_in_a_while_loop(tmp_path) -> None:  # noqa: ANN001
    _Loop.save(str(tmp_path))
    _same_preparation(str(tmp_path))


@pytest.mark.slow
def test_custom_gradients_are_frozen_from_the_protos(tmp_path) -> None:  # noqa: ANN001
    """A registered gradient only matters for training: EfficientNet's activations have one."""
    _Loop.save(str(tmp_path), custom_gradient=True)
    _same_preparation(str(tmp_path))


@pytest.mark.slow
def test_what_the_protos_path_does_not_handle_tensorflow_freezes(tmp_path) -> None:  # noqa: ANN001
    import tensorflow as tf

    path = str(tmp_path / "tf1")
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.Session(graph=graph) as tf1_session:
        x = tf.compat.v1.placeholder(tf.float32, [None, 8], name="x")
        w = tf.compat.v1.get_variable(
            "w", initializer=np.random.default_rng(3).normal(size=(8, 8)).astype(np.float32))
        y = tf.tanh(tf.matmul(x, w), name="y")
        tf1_session.run(tf.compat.v1.global_variables_initializer())
        tf.compat.v1.saved_model.simple_save(tf1_session, path, {"x": x}, {"y": y})
    _same_preparation(path, fallback=True)
    from workbench.conversion.session import ConversionSession

    session = ConversionSession(load_model(path), cache=False)
    session.convert(ConversionParams())
    assert "froze with TensorFlow (a TF1 SavedModel, without an object graph)" in (
        session.preparation_steps())


@pytest.mark.slow
def test_the_test_only_grappler_configuration_keeps_tensorflows_node_order() -> None:
    path = str(sample_models.build("digits_cnn"))
    fast = optimize(load_model(path), disable_non_trt_optimizers=True)
    slow = optimize(load_model(path), disable_non_trt_optimizers=True, fast_freeze=False)
    assert not fast.freeze_fallback
    assert fast.graph_def == slow.graph_def


@pytest.mark.slow
def test_big_weights_skip_the_import_and_grappler() -> None:
    loaded = load_model(str(sample_models.build("resnet50")))
    frozen = freeze.freeze_function(loaded.function)
    stand_in_bytes = sum(w.nbytes for w in frozen.weights.values())
    assert stand_in_bytes > 0.8 * 25.6e6 * 4  # nearly all of ResNet-50's weights
    assert frozen.graph_def.ByteSize() < 2e6  # what the import and Grappler carried


def _graph_with(weight: np.ndarray, consumer: str) -> tuple[freeze.FrozenGraph, list[str]]:
    """x -> MatMul(x, w) -> y, with w (a large Const) also reaching `consumer` when set."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, weight.shape[0]], tf.float32)])
    def f(x: tf.Tensor) -> tf.Tensor:
        w = tf.constant(weight)
        y = tf.matmul(x, w)
        if consumer == "scaled":  # a Mul by a constant: constant folding computes w * 2
            y = tf.matmul(x, w * 2.0) + y
        return y

    concrete = f.get_concrete_function()
    graph_def = concrete.graph.as_graph_def()
    weights, groups = freeze.take_weights(graph_def)
    fetches = [t.name for t in concrete.inputs + concrete.outputs]
    return freeze.FrozenGraph(graph_def, fetches[:1], fetches[1:], weights, groups), fetches


def test_a_weight_constant_folding_computes_with_is_not_stood_in() -> None:
    weight = np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)
    frozen, _ = _graph_with(weight, "scaled")
    assert not frozen.weights  # it feeds Mul(w, 2): kept real


def test_stand_ins_are_checked_by_a_second_grappler_run() -> None:
    from workbench.graph.prepare import run_grappler

    weight = np.random.default_rng(0).normal(size=(64, 64)).astype(np.float32)
    frozen, fetches = _graph_with(weight, "")
    names = set(frozen.weights)
    assert names
    optimized, stand_in_graph = freeze.optimize_with_stand_ins(
        frozen, lambda g: run_grappler(g, fetches))
    assert stand_in_graph is not None
    assert not frozen.weights  # moved into the result, none held twice
    consts = [n for n in optimized.node if n.name in names]
    assert np.array_equal(
        np.frombuffer(consts[0].attr["value"].tensor.tensor_content, np.float32),
        weight.ravel())

    # A Grappler that computes with the value (here: it rewrites the weight) is caught: the
    # weight goes back to its real value and Grappler runs on it.
    def value_dependent(graph_def):  # noqa: ANN001, ANN202
        result = run_grappler(graph_def, fetches)
        for node in result.node:
            if node.name in frozen.weights:
                node.attr["value"].tensor.float_val.append(1.0)
        return result

    frozen, fetches = _graph_with(weight, "")
    name = next(iter(frozen.weights))
    optimized, _ = freeze.optimize_with_stand_ins(frozen, value_dependent)
    assert not frozen.weights
    node = next(n for n in optimized.node if n.name == name)
    assert node.attr["value"].tensor.tensor_content == weight.tobytes()


def test_uniform_and_compressible_weights_stay_real() -> None:
    def eligible(values: np.ndarray) -> bool:
        return freeze._eligible(values.astype(np.float32))

    random = np.random.default_rng(1).normal(size=4096)
    assert eligible(random)
    assert not eligible(np.zeros(4096))
    tail = random.copy()
    tail[2000:] = 0.5  # Grappler would store only the first 2000 values
    assert not eligible(tail)
    tail[3000] = 0.25  # now the repeated run is too short to compress
    assert eligible(tail)


def test_small_and_non_float_weights_stay_real() -> None:
    from tensorflow.core.framework import graph_pb2, types_pb2

    graph_def = graph_pb2.GraphDef()
    for name, values in (("small", np.arange(100, dtype=np.float32)),
                         ("ints", np.arange(4096, dtype=np.int32)),
                         ("large", np.random.default_rng(2).normal(size=4096).astype(np.float32))):
        node = graph_def.node.add(name=name, op="Const")
        tensor = node.attr["value"].tensor
        tensor.dtype = types_pb2.DT_INT32 if values.dtype == np.int32 else types_pb2.DT_FLOAT
        tensor.tensor_shape.dim.add(size=values.size)
        tensor.tensor_content = values.tobytes()
    weights, _ = freeze.take_weights(graph_def)
    assert set(weights) == {"large"}
