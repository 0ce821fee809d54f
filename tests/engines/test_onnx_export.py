"""The ONNX exporter: every sample engine runs in ONNX Runtime as it runs in TensorFlow."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from test_segment import (
    MODELS,
    MODES,
    engine_io_values,
    engine_key,
    native_segments,
    segments,
    session,
)

from workbench.engines.onnx.segment_export import ExportError, export_onnx
from workbench.engines.segment import NativeSegment, SegmentGraph, extract_segment

# Engines whose op set ONNX cannot express simply: (model, mode) -> the op ExportError names.
UNEXPORTABLE: dict[tuple[str, str], str] = {}

pytestmark = pytest.mark.slow


def ort_session(model: onnx.ModelProto, options: ort.SessionOptions | None = None
                ) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


_EXPORTED: dict[tuple, onnx.ModelProto | ExportError] = {}
_SESSIONS: dict[tuple, ort.InferenceSession] = {}


def exported(model: str, mode: str) -> list[onnx.ModelProto | ExportError]:
    """Each engine's ONNX model, or the ExportError it raised (equal engines exported once)."""
    for seg in segments(model, mode):
        if engine_key(seg) not in _EXPORTED:
            try:
                _EXPORTED[engine_key(seg)] = export_onnx(seg)
            except ExportError as exc:
                _EXPORTED[engine_key(seg)] = exc
    return [_EXPORTED[engine_key(seg)] for seg in segments(model, mode)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
def test_exported_engine_matches_native(model: str, mode: str) -> None:
    for seg, onnx_model, native in zip(
        segments(model, mode), exported(model, mode), native_segments(model, mode), strict=True
    ):
        if isinstance(onnx_model, ExportError):
            assert onnx_model.op_type == UNEXPORTABLE.get((model, mode)), str(onnx_model)
            continue
        if engine_key(seg) not in _SESSIONS:
            _SESSIONS[engine_key(seg)] = ort_session(onnx_model)
        for batch in (1, 4):
            values = engine_io_values(model, batch)
            inputs = [values[t] for t in seg.engine.inputs]
            want = native(inputs)
            feeds = dict(zip(seg.input_names, inputs, strict=True))
            got = _SESSIONS[engine_key(seg)].run(seg.output_names, feeds)
            for name, g, w in zip(seg.engine.outputs, got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape, (seg.engine.name, name)
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4,
                                           err_msg=f"{seg.engine.name} {name} batch {batch}")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
def test_onnx_names_trace_back_to_tf_nodes(model: str, mode: str) -> None:
    for seg, onnx_model in zip(segments(model, mode), exported(model, mode), strict=True):
        if isinstance(onnx_model, ExportError):
            continue
        tf_names = {nd.name for nd in seg.graph_def.node}
        for node in onnx_model.graph.node:
            base = node.name.rsplit("/", 1)[0] if node.name not in tf_names else node.name
            assert node.name in tf_names or base in tf_names, node.name
        assert [i.name for i in onnx_model.graph.input] == seg.input_names
        assert [o.name for o in onnx_model.graph.output] == seg.output_names
        exported_nodes = {n.name for n in onnx_model.graph.node}
        consts = {nd.name for nd in seg.graph_def.node if nd.op == "Const"}
        assert set(seg.engine.nodes) - consts <= exported_nodes  # one ONNX node per TF node


# The softmax outputs of the random-weight classifiers are ~1e-3 (MobileNetV2's are exactly
# uniform), so atol 1e-4 alone would prove little: inner tensors are compared relative to their
# own magnitude (MobileNetV2's activations shrink to 1e-11 through its random-weight blocks).
INNER_OPS = {"Conv2D", "DepthwiseConv2dNative", "Relu", "Relu6", "AddV2", "MatMul"}


@pytest.mark.parametrize("model", ["resnet50", "mobilenet_v2"])
def test_inner_tensors_match_relative_to_their_scale(model: str) -> None:
    seg = segments(model, "implicit")[0]
    prepared = session(model).prepared("FP32")
    order = sorted(seg.engine.nodes, key=lambda n: prepared.graph[n].id)
    inner = [n for n in order if prepared.graph[n].op in INNER_OPS]
    picks = [*inner[:: len(inner) // 8], inner[-1]]
    engine = replace(seg.engine, outputs=(*seg.engine.outputs, *(f"{n}:0" for n in picks)))
    probed = extract_segment(prepared, engine)
    x = engine_io_values(model, 4)[seg.engine.inputs[0]]
    want = NativeSegment(probed)([x])
    got = ort_session(export_onnx(probed)).run(None, {probed.input_names[0]: x})
    for name, g, w in zip(engine.outputs, got, want, strict=True):
        scale = float(np.abs(w).max())
        assert float(np.abs(g - w).max()) <= 1e-4 * scale, (name, scale)


def test_implicit_batch_engine_has_a_symbolic_batch_dim() -> None:
    onnx_model = exported("resnet50", "implicit")[0]
    dims = onnx_model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and [d.dim_value for d in dims[1:]] == [224, 224, 3]
    out_dims = onnx_model.graph.output[0].type.tensor_type.shape.dim
    assert out_dims[0].dim_param == dims[0].dim_param  # Grappler proved them equal


def test_weights_are_initializers_and_shape_ints_int64() -> None:
    onnx_model = exported("digits_cnn", "dynamic")[0]
    kinds = {i.name: i.data_type for i in onnx_model.graph.initializer}
    conv = next(n for n in onnx_model.graph.node if n.op_type == "Conv")
    assert kinds[conv.input[1]] == onnx.TensorProto.FLOAT
    reshape = next(n for n in onnx_model.graph.node if n.op_type == "Reshape")
    producer = next(n for n in onnx_model.graph.node if reshape.input[1] in n.output)
    assert producer.op_type == "Cast"  # a shape computed at run time (dynamic shape mode)


def test_constant_operand_comes_second_so_ort_folds_batch_norm_into_conv(tmp_path) -> None:
    onnx_model = exported("resnet50", "implicit")[0]
    inits = {i.name for i in onnx_model.graph.initializer}
    muls = [n for n in onnx_model.graph.node if n.op_type in ("Mul", "Add")]
    assert muls and not [n.name for n in muls if n.input[0] in inits and n.input[1] not in inits]
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort_session(onnx_model, options)
    optimized = onnx.load(str(tmp_path / "optimized.onnx"))
    convs = [n for n in onnx_model.graph.node if n.op_type == "Conv"]
    assert sum(n.op_type == "Conv" for n in optimized.graph.node) == len(convs)  # Mul folded


def function_segment(body, *specs) -> SegmentGraph:
    """One engine holding every node of `body` (all but its inputs and outputs), prepared the
    way TF-TRT prepares a model (Grappler first)."""
    import tensorflow as tf

    from workbench.conversion.result import EngineInfo
    from workbench.graph.loading import LoadedModel
    from workbench.graph.prepare import prepare

    @tf.function(input_signature=[tf.TensorSpec(shape, dtype, name=f"x{i}")
                                  for i, (shape, dtype) in enumerate(specs)])
    def forward(*args):
        result = body(*args)
        results = result if isinstance(result, tuple) else (result,)
        return {f"y{i}": tf.identity(r) for i, r in enumerate(results)}

    function = forward.get_concrete_function()
    prepared = prepare(LoadedModel(source=function.name, kind="function", function=function),
                       "FP32")
    ends = {*prepared.optimized.input_nodes, *prepared.optimized.output_nodes}
    members = [n for n in prepared.graph.real_nodes if n.name not in ends]
    names = {n.name for n in members}
    inputs = dict.fromkeys(str(r) for n in members for r in n.inputs if r.node not in names)
    outputs = dict.fromkeys(str(r) for name in prepared.optimized.output_nodes
                            for r in prepared.graph[name].inputs)
    engine = EngineInfo(
        name="TRTEngineOp_000_000", nodes=tuple(sorted(names)), native_ops={},
        native_node_count=len(members), effective_size=len(members),
        input_dtypes=(), output_dtypes=(), input_shapes=(), output_shapes=(),
        inputs=tuple(inputs), outputs=tuple(outputs),
    )
    return extract_segment(prepared, engine)


def assert_onnx_matches_native(
    seg: SegmentGraph, inputs: list[np.ndarray], opset: int = 17
) -> None:
    want = NativeSegment(seg)(inputs)
    feeds = dict(zip(seg.input_names, inputs, strict=True))
    got = ort_session(export_onnx(seg, opset)).run(seg.output_names, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def _cases():
    """Ops the exporter supports beyond the sample models' engines: (id, body, input specs)."""
    import tensorflow as tf

    image = ([None, 8, 8, 4], tf.float32)  # even sizes: SAME pads one pixel, at the end
    matrix = ([None, 6], tf.float32)
    nn = tf.nn
    w = np.random.default_rng(3).standard_normal((3, 3, 4, 5)).astype(np.float32)
    dw = np.random.default_rng(4).standard_normal((3, 3, 4, 2)).astype(np.float32)
    stats = [np.linspace(0.5, 2, 4, dtype=np.float32) + k for k in range(4)]
    w3 = np.random.default_rng(6).standard_normal((2, 3, 2, 3, 4)).astype(np.float32)
    return [
        ("conv_valid_dilated", lambda x: nn.conv2d(x, w, 1, "VALID", dilations=2), [image]),
        ("conv_same_strided", lambda x: nn.conv2d(x, w, 2, "SAME"), [image]),
        # ONNX Runtime refuses auto_pad SAME with dilations: exported as explicit pads.
        ("conv_same_dilated", lambda x: (nn.conv2d(x, w, 1, "SAME", dilations=2),
                                         tf.raw_ops.DepthwiseConv2dNative(
                                             input=x, filter=dw, strides=[1, 1, 1, 1],
                                             padding="SAME", dilations=[1, 3, 2, 1])), [image]),
        ("conv_explicit", lambda x: nn.conv2d(x, w, 1, [[0, 0], [1, 2], [2, 0], [0, 0]]), [image]),
        ("depthwise_multiplier", lambda x: nn.depthwise_conv2d(x, dw, [1, 2, 2, 1], "SAME"),
         [image]),
        ("pools", lambda x: (nn.avg_pool2d(x, 3, 2, "SAME"), nn.max_pool2d(x, 2, 2, "VALID")),
         [image]),
        ("fused_batch_norm", lambda x: tf.compat.v1.nn.fused_batch_norm(
            x, stats[0], stats[1], stats[2], stats[3], is_training=False)[0], [image]),
        ("bias_pad_mirror", lambda x: tf.pad(nn.bias_add(x, stats[0]), [[0, 0], [1, 1], [2, 0],
                                             [0, 0]], mode="REFLECT") + tf.pad(x, [[0, 0], [1, 1],
                                             [2, 0], [0, 0]], constant_values=2.0), [image]),
        ("unary", lambda x: (nn.relu6(x * 4), nn.leaky_relu(x, 0.3), tf.square(x),
                             tf.math.erfc(x), nn.elu(x), nn.selu(x), nn.softplus(x),
                             tf.abs(x), tf.floor(x), tf.sign(x), tf.math.rsqrt(tf.abs(x) + 1)),
         [matrix]),
        ("binary", lambda x, y: (tf.maximum(x, y), tf.minimum(x, y), tf.pow(tf.abs(x) + 1, y),
                                 tf.math.squared_difference(x, y), tf.math.floordiv(x, y + 3),
                                 tf.cast(tf.not_equal(x > 0, y > 0), tf.int32), tf.add_n([x, y, x]),
                                 tf.where(x > y, x, y), x / (y * y + 1)), [matrix, matrix]),
        ("matmuls", lambda x, y: (tf.matmul(x, y, transpose_a=True),
                                  tf.linalg.matmul(x[:, None], y[:, None], adjoint_b=True),
                                  tf.einsum("bi,bj->bij", x, y)), [matrix, matrix]),
        # Keras attention's subscripts: uppercase, renamed to lowercase for TensorRT.
        ("einsum_uppercase", lambda q, k: tf.einsum("BTNH,BSNH->BNTS", q, k),
         [([None, 4, 2, 3], tf.float32), ([None, 5, 2, 3], tf.float32)]),
        ("softmaxes", lambda x: (nn.softmax(x), nn.log_softmax(x)), [matrix]),
        ("shapes", lambda x: (tf.transpose(x, [0, 2, 1, 3]), tf.squeeze(x[:, :1, :, :1], [1, 3]),
                              tf.unstack(x, axis=3)[1], tf.stack([x, x], axis=-1),
                              tf.concat([x, x], 2), tf.tile(x, [1, 2, 1, 1]),
                              tf.reshape(x, [-1, 256]), tf.slice(x, [0, 1, 2, 0], [-1, 3, 2, 2])),
         [image]),
        ("reductions", lambda x: (tf.reduce_sum(x, [1, 2]), tf.reduce_max(x, -1, keepdims=True),
                                  tf.reduce_min(x, 1), tf.reduce_prod(x[..., :2] * 0.5 + 1, 3),
                                  tf.argmax(x, 2), tf.argmin(x, 1, output_type=tf.int32)),
         [image]),
        ("dynamic_fill_range", lambda x: (tf.fill(tf.shape(x), 3.0), tf.ones_like(x),
                                          tf.zeros_like(x), tf.range(tf.shape(x)[0]) * 2,
                                          tf.reshape(x, tf.stack([tf.shape(x)[0], 3, 2]))),
         [matrix]),
        ("gather_cast", lambda x, i: (tf.gather(x, i, axis=1), tf.cast(tf.gather(x, i[0]),
                                                                       tf.int32)),
         [matrix, ([3], tf.int32)]),
        # batch_dims: accepted in dynamic-shape mode (as TF-TRT did), exported as GatherND.
        ("gather_batch_dims", lambda p, i: (tf.gather(p, i, axis=1, batch_dims=1),
                                            tf.gather(p, i, axis=2, batch_dims=1),
                                            tf.gather(p, i[:, 0], axis=-1, batch_dims=1)),
         [([None, 4, 5, 3], tf.float32), ([None, 2, 2], tf.int32)]),
        # Op types TF-TRT converts that the sample models do not hold.
        ("clip", lambda x: tf.raw_ops.ClipByValue(t=x, clip_value_min=-0.5,
                                                  clip_value_max=x * 0 + 0.7), [matrix]),
        ("split_top_k", lambda x: (*tf.split(x, 3, axis=1), *tf.math.top_k(x, 4)), [matrix]),
        ("depth_space", lambda x: (tf.nn.depth_to_space(x, 2), tf.nn.space_to_depth(x, 2)),
         [image]),
        ("resizes", lambda x: (
            tf.compat.v1.image.resize_bilinear(x, [11, 5], align_corners=True),
            tf.compat.v1.image.resize_nearest_neighbor(x, [13, 6], align_corners=True),
            tf.compat.v1.image.resize_nearest_neighbor(x, [11, 5], half_pixel_centers=True),
            tf.compat.v1.image.resize_nearest_neighbor(x, [5, 16])), [image]),
        ("conv_pool_3d", lambda x: (
            nn.conv3d(x, w3, [1, 1, 2, 1, 1], "SAME", dilations=[1, 1, 1, 1, 1]),
            nn.conv3d(x, w3, [1] * 5, "VALID"), nn.max_pool3d(x, 2, 2, "VALID"),
            nn.avg_pool3d(x, [2, 3, 2], 1, "SAME")), [([None, 4, 6, 5, 3], tf.float32)]),
        ("vec_permute", lambda v, m: (tf.raw_ops.DataFormatVecPermute(x=v),
                                      tf.raw_ops.DataFormatVecPermute(x=m, src_format="NCHW",
                                                                      dst_format="NHWC")),
         [([4], tf.int32), ([4, 2], tf.int32)]),
    ]


CASES = {case[0]: case for case in _cases()}
# The op types a case exists for: Grappler must leave them in the segment.
CASE_OPS = {"clip": {"ClipByValue"}, "einsum_uppercase": {"Einsum"},
            "split_top_k": {"Split", "TopKV2"},
            "depth_space": {"DepthToSpace", "SpaceToDepth"},
            "resizes": {"ResizeBilinear", "ResizeNearestNeighbor"},
            "vec_permute": {"DataFormatVecPermute"}, "gather_batch_dims": {"GatherV2"},
            "conv_pool_3d": {"Conv3D", "MaxPool3D", "AvgPool3D"}}


# Opset 13 is the oldest we export (Unsqueeze/Squeeze axes inputs); 18 moved reduction axes to
# inputs and gave Split `num_outputs`.
@pytest.mark.parametrize(
    ("case", "opset"), [(case, 17) for case in CASES] + [("shapes", 13), ("reductions", 13),
                                                          ("shapes", 18), ("reductions", 18)]
)
def test_op_family_matches_tensorflow(case: str, opset: int) -> None:
    _, body, specs = CASES[case]
    seg = function_segment(body, *specs)
    assert CASE_OPS.get(case, set()) <= {n.op for n in seg.graph_def.node}
    rng = np.random.default_rng(5)
    inputs = []
    for spec in seg.input_specs:
        shape = tuple(d if d >= 0 else 3 for d in spec.shape)
        if spec.dtype == "int32":
            inputs.append(rng.integers(0, 3, shape).astype(np.int32))
        else:
            inputs.append(rng.standard_normal(shape).astype(np.float32))
    assert_onnx_matches_native(seg, inputs, opset)


def nms_segment(q: int, classes: int, boxes: int | None, **options) -> SegmentGraph:
    """One CombinedNonMaxSuppression (max 6 per class, IoU 0.5, score 0.3) as an engine."""
    import tensorflow as tf

    total = options.pop("total", 10)
    return function_segment(
        lambda b, s: tf.image.combined_non_max_suppression(b, s, 6, total, 0.5, 0.3, **options),
        ([None, boxes, q, 4], tf.float32), ([None, boxes, classes], tf.float32))


def nms_inputs(batch: int, boxes: int, q: int, classes: int, seed: int) -> list[np.ndarray]:
    """Crowded boxes (many overlap), corners in either order, some empty and outside [0, 1];
    some scores exactly at the threshold, the last batch's all below it. No other ties: TF
    orders equal scores as its heap and unstable sort happen to."""
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-0.1, 1.1, (batch, boxes, q, 2))
    sizes = rng.uniform(0.05, 0.5, (batch, boxes, q, 2)) * rng.choice([-1, 1], (batch, boxes, q, 2))
    sizes[:, ::9] = 0.0
    corners = np.concatenate([centres - sizes / 2, centres + sizes / 2], -1).astype(np.float32)
    scores = rng.uniform(0, 1, (batch, boxes, classes)).astype(np.float32)
    scores[:, ::5] = np.float32(0.3)
    scores[-1] *= np.float32(0.25)
    return [corners, scores]


# (q, classes, box count or None for unknown, options)
NMS_CASES = {
    "shared_boxes": (1, 3, 40, {"clip_boxes": True}),
    "class_boxes": (4, 4, 30, {"clip_boxes": False}),
    "pad_per_class": (1, 2, 25, {"pad_per_class": True, "total": 100}),
    "fewer_candidates_than_total": (1, 2, 4, {"total": 20}),
    "unknown_box_count": (4, 4, None, {"pad_per_class": True, "total": 7}),
}


@pytest.mark.parametrize("case", NMS_CASES)
def test_combined_nms_matches_tensorflow(case: str) -> None:
    """Greedy NMS per class as a fixed-point Loop, then TopK over the classes: TF's boxes,
    scores, classes and counts, its padding included, exactly."""
    q, classes, boxes, options = NMS_CASES[case]
    seg = nms_segment(q, classes, boxes, **options)
    assert {n.op for n in seg.graph_def.node} >= {"CombinedNonMaxSuppression"}
    for batch in (1, 3):
        inputs = nms_inputs(batch, boxes or 33, q, classes, seed=batch)
        assert_onnx_matches_native(seg, inputs)
    valid = NativeSegment(seg)(inputs)[3]
    assert valid[-1] == 0 and valid[0] > 0


def test_nms_with_too_many_boxes_for_its_iou_matrix_is_not_exported() -> None:
    from workbench.engines.onnx.ops.nms import MAX_BOXES

    with pytest.raises(ExportError, match=f"{MAX_BOXES + 1} boxes per class"):
        export_onnx(nms_segment(1, 2, MAX_BOXES + 1))


def test_half_pixel_nearest_resize_picks_tensorflows_pixels() -> None:
    """Exported as ONNX's half_pixel rounded half up (TensorRT refuses tf_half_pixel_for_nn
    with floor): the same source pixel as TF's floor((x + 0.5) * in / out) at every size,
    growing and shrinking; distinct pixel values show any other pick."""
    import tensorflow as tf

    sizes = [(h, w) for h in (1, 2, 3, 5, 7, 9, 16, 17, 31) for w in (3, 13, 26)]
    seg = function_segment(lambda x: tuple(tf.compat.v1.image.resize_nearest_neighbor(
        x, size, half_pixel_centers=True) for size in sizes), ([None, 7, 13, 2], tf.float32))
    assert_onnx_matches_native(seg, [np.arange(2 * 7 * 13 * 2, dtype=np.float32).reshape(
        2, 7, 13, 2)])


def test_identity_n_exports_each_of_its_outputs() -> None:
    """Grappler removes IdentityN from prepared graphs, so this segment is written by hand."""
    import tensorflow as tf

    from workbench.conversion.result import EngineInfo
    from workbench.graph.nodes import TensorSpec

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="TensorRTInputPH_0")
        y = tf.compat.v1.placeholder(tf.int32, [2], name="TensorRTInputPH_1")
        both = tf.raw_ops.IdentityN(input=[x * 2.0, y], name="pair")
        tf.identity(both[0], name="TensorRTOutputPH_0")
        tf.identity(both[1], name="TensorRTOutputPH_1")
    engine = EngineInfo(name="TRTEngineOp_000_000", nodes=("pair",), native_ops={},
                        native_node_count=1, effective_size=1, input_dtypes=(),
                        output_dtypes=(), input_shapes=(), output_shapes=())
    seg = SegmentGraph(engine, graph.as_graph_def(), ["TensorRTInputPH_0", "TensorRTInputPH_1"],
                       ["TensorRTOutputPH_0", "TensorRTOutputPH_1"],
                       [TensorSpec("float", (-1, 3)), TensorSpec("int32", (2,))],
                       [TensorSpec("float", (-1, 3)), TensorSpec("int32", (2,))])
    assert_onnx_matches_native(seg, [np.arange(6, dtype=np.float32).reshape(2, 3),
                                     np.array([4, 5], np.int32)])


def test_unsupported_op_raises_export_error_naming_op_and_node() -> None:
    import tensorflow as tf

    seg = function_segment(lambda x: tf.math.cumsum(tf.nn.relu(x), axis=1), ([None, 4], tf.float32))
    with pytest.raises(ExportError, match=r"Cannot export Cumsum node .*Cumsum") as info:
        export_onnx(seg)
    assert info.value.op_type == "Cumsum"
    ones = np.ones((2, 4), np.float32)
    assert np.allclose(NativeSegment(seg)([ones])[0], [[1, 2, 3, 4]] * 2)


def test_strided_slice_masks_match_tensorflow() -> None:
    import tensorflow as tf

    # begin/end masks, a new axis, an ellipsis, a shrunk axis and a negative stride at once.
    seg = function_segment(
        lambda x: (x[:, tf.newaxis, ..., ::-2], x[1:, -1:][:, 0][:, None], x[-1, 1::2, ..., 0],
                   x[::-1, :, tf.newaxis, -1]),
        ([None, 3, 4, 5], tf.float32),
    )
    x = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    assert_onnx_matches_native(seg, [x])


def test_resnet50_export_time() -> None:
    seg = segments("resnet50", "implicit")[0]
    start = time.perf_counter()
    onnx_model = export_onnx(seg)
    seconds = time.perf_counter() - start
    print(f"\nResNet-50 engine ({len(seg.engine.nodes)} TF nodes -> "
          f"{len(onnx_model.graph.node)} ONNX nodes) exported in {seconds:.2f} s")
    assert seconds < 5.0  # tf2onnx took 30 s for the whole model


def test_every_op_tf_trt_converts_is_exported_or_says_why_not() -> None:
    from workbench.conversion.ops import REGISTRY
    from workbench.engines.onnx.ops import CONVERTERS
    from workbench.engines.onnx.segment_export import NEVER_EXPORTED, NOT_EXPORTED

    assert set(REGISTRY) - set(CONVERTERS) == set(NOT_EXPORTED) | NEVER_EXPORTED
    assert not set(NOT_EXPORTED) & set(CONVERTERS)


def test_a_segment_with_an_unexported_op_gets_a_note_and_the_reason() -> None:
    import tensorflow as tf

    from workbench.conversion.result import EngineInfo
    from workbench.engines.onnx.segment_export import export_notes

    def info(name: str, ops: dict[str, int]) -> EngineInfo:
        return EngineInfo(name=name, nodes=(), native_ops=ops, native_node_count=0,
                          effective_size=0, input_dtypes=(), output_dtypes=(), input_shapes=(),
                          output_shapes=())

    notes = export_notes([info("TRTEngineOp_000_000", {"Conv2D": 1, "Const": 2}),
                          info("TRTEngineOp_000_001", {"Conv2DBackpropInput": 1, "Relu": 1,
                                                       "Const": 1})])
    assert notes == ["TRTEngineOp_000_001 runs natively here (TF-TRT would build a TensorRT "
                     "engine): the ONNX exporter cannot express Conv2DBackpropInput: "
                     "transposed convolutions are not exported yet"]
    w = np.ones((2, 2, 4, 3), np.float32)
    seg = function_segment(lambda x: tf.nn.relu(tf.nn.conv2d_transpose(
        x, w, tf.stack([tf.shape(x)[0], 8, 8, 4]), 2)), ([None, 4, 4, 3], tf.float32))
    assert "Conv2DBackpropInput" in {n.op for n in seg.graph_def.node}
    with pytest.raises(ExportError, match="Conv2DBackpropInput node .*transposed convolutions"):
        export_onnx(seg)


@pytest.mark.parametrize("model", ["resnet50", "digits_cnn"])
def test_file_export_is_the_in_memory_export(model: str, tmp_path) -> None:
    """`write_export` streams the weights into a data file beside a small model, and
    `write_inline` makes that one self-contained file again: both the same model as
    `export_onnx`'s, weights and all (a saved engine and `<engine>.onnx` are that file)."""
    from workbench.engines.onnx.external_data import data_file, split_inline, write_inline
    from workbench.engines.onnx.segment_export import write_export

    seg = next(s for s in segments(model, "implicit")
               if not isinstance(exported(model, "implicit")[0], ExportError))
    want = export_onnx(seg)
    path = tmp_path / "engine.onnx"
    write_export(seg, path)
    small = onnx.load(str(path), load_external_data=False)
    assert {t.data_location for t in small.graph.initializer
            if np.prod(t.dims) > 1024} == {onnx.TensorProto.EXTERNAL}
    assert data_file(path).stat().st_size > path.stat().st_size
    loaded = onnx.load(str(path))
    for tensor in loaded.graph.initializer:  # onnx.load sets it to DEFAULT with the data
        tensor.ClearField("data_location")
    assert loaded == want
    with (tmp_path / "inline.onnx").open("wb") as out:
        write_inline(path, out)
    assert onnx.load(str(tmp_path / "inline.onnx")) == want
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    # A saved engine's model is split again as it is read (`workbench.load()`).
    split = tmp_path / "split.onnx"
    with (tmp_path / "inline.onnx").open("rb") as source:
        split_inline(source, split)
    assert _external(split) == _external(path)
    loaded = onnx.load(str(split))
    for tensor in loaded.graph.initializer:
        tensor.ClearField("data_location")
    assert loaded == want


def _external(path) -> set[str]:
    model = onnx.load(str(path), load_external_data=False)
    return {t.name for t in model.graph.initializer
            if t.data_location == onnx.TensorProto.EXTERNAL}
