"""Segment extraction and native segments, against the EngineInfo and the whole prepared graph.

The helpers here (sessions, random model inputs, running the whole prepared graph) are shared
with test_onnx_export.py.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import numpy as np
import pytest

import sample_models
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.engines.segment import (
    INPUT_PREFIX,
    OUTPUT_PREFIX,
    NativeSegment,
    SegmentGraph,
    extract_segment,
)
from workbench.errors import WorkbenchError
from workbench.graph.nodes import numpy_dtype_name
from workbench.graph.prepare import PreparedGraph

MODELS = ["resnet50", "mobilenet_v2", "digits_cnn", "quickstart_mlp", "tiny_bert", "detector"]
MODES = {"implicit": False, "dynamic": True}
FREE_DIM = 8  # size of unknown non-batch dims (tiny_bert's sequence length)

pytestmark = pytest.mark.slow


@cache
def session(model: str) -> ConversionSession:
    return ConversionSession.open(sample_models.build(model))


@cache
def segments(model: str, mode: str) -> list[SegmentGraph]:
    """Every engine of `model` converted in FP32 and `mode`, extracted."""
    s = session(model)
    result = s.convert(ConversionParams(use_dynamic_shape=MODES[mode]))
    return [extract_segment(s.prepared("FP32"), engine) for engine in result.engines]


def random_array(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random values a model accepts: ints in {0, 1} are valid ids, masks and type ids."""
    if dtype == np.uint8:
        return rng.integers(0, 256, shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.standard_normal(shape).astype(dtype)


def model_inputs(prepared: PreparedGraph, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in prepared.optimized.input_nodes:
        spec = prepared.graph[name].output_specs[0]
        shape = tuple(
            d if d >= 0 else (batch if i == 0 else FREE_DIM) for i, d in enumerate(spec.shape)
        )
        feeds[name] = random_array(np.dtype(numpy_dtype_name(spec.dtype)), shape, rng)
    return feeds


def prepared_function(prepared: PreparedGraph, tensors: list[str]):
    """The whole prepared graph as a function: model inputs -> `tensors` ("node:port")."""
    import tensorflow as tf

    def _import() -> None:
        tf.compat.v1.import_graph_def(prepared.graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(_import, [])
    get = wrapped.graph.get_tensor_by_name
    feeds = [get(f"{n}:0") for n in prepared.optimized.input_nodes]
    return wrapped.prune(feeds, [get(t) for t in tensors])


@cache
def _engine_tensors(model: str) -> tuple[list[str], object]:
    tensors = sorted({t for mode in MODES for seg in segments(model, mode)
                      for t in (*seg.engine.inputs, *seg.engine.outputs)})
    return tensors, prepared_function(session(model).prepared("FP32"), tensors)


@cache
def engine_io_values(model: str, batch: int) -> dict[str, np.ndarray]:
    """Every engine input and output of `model` (both modes), from one run of the whole graph."""
    import tensorflow as tf

    tensors, function = _engine_tensors(model)
    feeds = model_inputs(session(model).prepared("FP32"), batch)
    values = function(*(tf.convert_to_tensor(v) for v in feeds.values()))
    return {t: v.numpy() for t, v in zip(tensors, values, strict=True)}


def engine_key(seg: SegmentGraph) -> tuple:
    """Engines with equal nodes and I/O compute the same (ResNet-50's is one in both modes)."""
    return seg.engine.nodes, seg.engine.inputs, seg.engine.outputs


_NATIVE: dict[tuple, NativeSegment] = {}


def native_segments(model: str, mode: str) -> list[NativeSegment]:
    natives = []
    for seg in segments(model, mode):
        if engine_key(seg) not in _NATIVE:
            _NATIVE[engine_key(seg)] = NativeSegment(seg)
        natives.append(_NATIVE[engine_key(seg)])
    return natives


def _normalized(shape: tuple[int, ...] | None) -> tuple[int, ...] | None:
    return None if shape is None else tuple(d if d >= 0 else -1 for d in shape)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
def test_segment_io_matches_engine_info(model: str, mode: str) -> None:
    extracted = segments(model, mode)
    assert extracted, f"{model} ({mode}) has no engines"
    for seg in extracted:
        engine = seg.engine
        assert seg.input_names == [f"{INPUT_PREFIX}{i}" for i in range(len(engine.inputs))]
        assert seg.output_names == [f"{OUTPUT_PREFIX}{i}" for i in range(len(engine.outputs))]
        assert [numpy_dtype_name(s.dtype) for s in seg.input_specs] == list(engine.input_dtypes)
        assert [numpy_dtype_name(s.dtype) for s in seg.output_specs] == list(engine.output_dtypes)
        assert [_normalized(s.shape) for s in seg.input_specs] == list(engine.input_shapes)
        assert [_normalized(s.shape) for s in seg.output_specs] == list(engine.output_shapes)
        # The GraphDef is TF-TRT's native segment: same node count and op histogram.
        io_names = {*seg.input_names, *seg.output_names}
        body = [nd for nd in seg.graph_def.node if nd.name not in io_names]
        assert len(body) == engine.native_node_count
        assert dict(Counter(nd.op for nd in body)) == engine.native_ops
        placeholders = [nd.name for nd in seg.graph_def.node if nd.op == "Placeholder"]
        assert placeholders == seg.input_names
        for nd in body:  # nothing outside the segment is referenced
            for text in nd.input:
                assert text.lstrip("^").split(":")[0] in {n.name for n in seg.graph_def.node}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
def test_native_segment_equals_whole_graph(model: str, mode: str) -> None:
    for batch in (1, 4):
        values = engine_io_values(model, batch)
        for seg, native in zip(segments(model, mode), native_segments(model, mode), strict=True):
            outputs = native([values[t] for t in seg.engine.inputs])
            assert len(outputs) == len(seg.engine.outputs)
            for name, got in zip(seg.engine.outputs, outputs, strict=True):
                want = values[name]
                assert got.dtype == want.dtype and got.shape == want.shape, name
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_segment_inputs_are_placeholders_with_engine_shapes() -> None:
    seg = segments("resnet50", "implicit")[0]
    placeholder = next(nd for nd in seg.graph_def.node if nd.name == f"{INPUT_PREFIX}0")
    dims = [d.size for d in placeholder.attr["shape"].shape.dim]
    assert dims == [-1, 224, 224, 3]
    output = next(nd for nd in seg.graph_def.node if nd.name == f"{OUTPUT_PREFIX}0")
    assert output.op == "Identity" and output.input[0].split(":")[0] in seg.engine.nodes


def test_native_segment_rejects_wrong_input_count() -> None:
    seg = segments("quickstart_mlp", "implicit")[0]
    with pytest.raises(WorkbenchError, match="takes 1 inputs, got 2"):
        NativeSegment(seg)([np.zeros((1, 64), np.float32)] * 2)
