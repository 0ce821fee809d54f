"""Engine anatomy: the kernels TensorRT-RTX's real builder makes (no GPU needed to build), each
with the TF nodes it holds, and the same view read from real trtexec layer-info exports."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import sample_models
from tests.conftest import run_cli
from workbench import trt_convert as trt
from workbench.engines.inspection import tensorrt_verdict as verdict_module
from workbench.engines.inspection.tensorrt_kernels import (
    KERNEL_COLUMNS,
    KERNEL_JSON_KEYS,
    onnx_producers,
    tf_node_of,
    tf_nodes_of,
)
from workbench.engines.inspection.tensorrt_verdict import tensorrt_verdict
from workbench.engines.profiles import Profile
from workbench.engines.settings import BuildRequest
from workbench.profiling.trtexec import fixtures_dir, read_trtexec_kernels
from workbench.viz.graphs import to_svg
from workbench.viz.kernel_graph import kernel_graph

pytest.importorskip("tensorrt_rtx", reason='needs TensorRT-RTX: pip install "tftrt-workbench'
                                           '[tensorrt]"')


@pytest.fixture(autouse=True)
def fresh_verdicts(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Every test really builds: verdicts are cached in a folder of the test's own."""
    folder = tmp_path_factory.mktemp("verdicts")
    monkeypatch.setattr(verdict_module, "_verdict_dir", lambda: folder)
    monkeypatch.setattr(verdict_module, "_memory", {})


def converter_for(name: str, **kwargs: object) -> trt.TrtGraphConverterV2:
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(sample_models.build(name)),
                                        **kwargs)  # type: ignore[arg-type]
    converter.convert()
    return converter


# --- a small network whose fusion we know -----------------------------------------------------

def _conv_bias_relu_with_a_dead_branch() -> onnx.ModelProto:
    """TF-like names: `net/conv` (its bias `net/conv/bias`, a helper node as our exporter names
    them), `net/relu`; `net/unused` computes a value nobody reads."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.normal(size=(8, 3, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.normal(size=(1, 8, 1, 1)).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["conv"], name="net/conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["conv", "b"], ["biased"], name="net/conv/bias"),
             helper.make_node("Relu", ["biased"], ["y"], name="net/relu"),
             helper.make_node("Mul", ["x", "x"], ["dead"], name="net/unused")]
    graph = helper.make_graph(
        nodes, "conv_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                           ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, 16, 16])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_conv_bias_relu_fuse_into_one_kernel_and_the_dead_node_is_removed():
    model = _conv_bias_relu_with_a_dead_branch()
    shapes = ((1, 3, 16, 16),), ((4, 3, 16, 16),), ((4, 3, 16, 16),)
    verdict = tensorrt_verdict(model, request=BuildRequest(profiles=(Profile(*shapes),)),
                               name="conv", tf_nodes=["net/conv", "net/relu", "net/unused"])
    assert verdict.built, verdict.error
    assert verdict.layers == len(verdict.kernels) >= 1
    holding = [k for k in verdict.kernels if "net/conv" in k.nodes]
    assert len(holding) == 1, verdict.kernels
    (fused,) = holding
    # Vertical fusion: the convolution, its bias (a helper node, named back to its TF node)
    # and the ReLU run as one kernel.
    assert set(fused.nodes) == {"net/conv", "net/relu"}
    assert set(fused.onnx_nodes) == {"net/conv", "net/conv/bias", "net/relu"}
    assert verdict.removed_nodes == ("net/unused",)  # dead-layer removal
    # Its tensors: the input at the profile's dynamic batch, the output in the network's type.
    assert fused.outputs and fused.outputs[-1].shape[1:] == (8, 16, 16)
    assert {t.dtype for t in fused.outputs} == {"FP32"} and fused.outputs[0].format
    table = verdict.kernel_table()
    assert list(table.columns) == KERNEL_COLUMNS and len(table) == len(verdict.kernels)
    document = verdict.to_json()
    assert [list(k) for k in document["kernels"]] == [list(KERNEL_JSON_KEYS)] * len(
        verdict.kernels)
    assert document["removed_nodes"] == ["net/unused"]
    # Drawn by the real `dot`: one box for the fused kernel, the dead node noted as removed.
    svg = to_svg(kernel_graph(verdict.anatomy))
    assert "removed by TensorRT: 1 TF node<" in svg and fused.type in svg
    # From the disk cache, the same anatomy.
    verdict_module._memory.clear()
    again = tensorrt_verdict(model, request=BuildRequest(profiles=(Profile(*shapes),)),
                             name="conv", tf_nodes=["net/conv", "net/relu", "net/unused"])
    assert again.to_json() == document


def test_onnx_names_map_back_to_tf_nodes():
    names = {"a/conv", "a/conv/Relu"}
    assert tf_node_of("a/conv/Relu", names) == "a/conv/Relu"
    assert tf_node_of("a/conv/bias/channels_1", names) == "a/conv"
    assert tf_node_of("workbench_fp16/a/conv_fp16_cast", names) is None
    assert tf_node_of("TensorRTOutputPH_0", None) is None
    assert tf_node_of("a/conv/bias_QuantizeLinear", names) is None  # INT8's, not a TF node's
    assert tf_node_of("elsewhere/x", names) is None
    assert tf_nodes_of(["a/conv", "a/conv/w", "a/conv/Relu"], names) == ["a/conv", "a/conv/Relu"]


# --- the sample models ----------------------------------------------------------------------

def _exported_compute_nodes(converter: trt.TrtGraphConverterV2, engine: str) -> list[str]:
    """The engine's TF nodes that became ONNX nodes (Consts become weights)."""
    converted = converter._converted_func
    model = converted.onnx_model(engine, keep=False)
    return tf_nodes_of(onnx_producers(model), converted.segments[engine].segment.engine.nodes)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["FP32", "FP16"])
def test_resnet50_every_compute_node_is_in_a_kernel_and_convolutions_fuse(precision):
    converter = converter_for("resnet50", precision_mode=precision)
    (name, verdict), = converter.tensorrt_verdicts().items()
    assert verdict.built, verdict.error
    in_kernels = {n for k in verdict.kernels for n in k.nodes}
    compute = _exported_compute_nodes(converter, name)
    assert len(compute) > 250 and set(compute) <= in_kernels | set(verdict.removed_nodes)
    assert len(in_kernels & set(compute)) >= 0.98 * len(compute)
    assert len(verdict.kernels) < len(compute) / 3  # fusion: many nodes per kernel
    # A bottleneck's first convolution runs with its bias, batch norm and ReLU in one kernel
    # (FP16: the batch norm was folded into the weights first, and is listed with it).
    scope = "StatefulPartitionedCall/resnet50_1/conv2_block1_1_"
    (kernel,) = [k for k in verdict.kernels if f"{scope}conv_1/convolution" in k.nodes]
    assert {f"{scope}conv_1/BiasAdd", f"{scope}bn_1/batchnorm/mul_1",
            f"{scope}bn_1/batchnorm/add_1", f"{scope}relu_1/Relu"} <= set(kernel.nodes)
    if precision == "FP16":
        assert verdict.anatomy.folded[f"{scope}bn_1/batchnorm/mul_1"] == kernel.name
        assert "FP16" in {t.dtype for t in kernel.outputs}
    # The report's JSON carries the kernels per engine.
    (engine,) = converter.report.to_dict()["engines"]
    assert engine["tensorrt"]["kernels"] == [k.to_json() for k in verdict.kernels]


# Ops that compute shapes or only relabel memory: TensorRT folds them into its shape
# calculations or into the kernels' addressing (a Tensordot's reshapes around its MatMul).
@pytest.mark.slow
def test_tiny_bert_every_node_is_in_one_kernel_a_shape_node_or_removed():
    """Issue 44: in dynamic shape, each non-Const, non-Identity node of every engine is in
    exactly one of a kernel, `shape_nodes` (Tensordot's Shape/GatherV2/Prod/concat) or
    `removed_nodes`; for at least 95% of each engine's nodes."""
    converter = converter_for("tiny_bert", use_dynamic_shape=True)
    verdicts = converter.tensorrt_verdicts()
    converted = converter._converted_func
    assert verdicts and all(v.built for v in verdicts.values())
    shape_ops: set[str] = set()
    for name, verdict in verdicts.items():
        ops = {n.name: n.op for n in converted.segments[name].segment.graph_def.node}
        nodes = [n for n in converted.segments[name].segment.engine.nodes
                 if ops[n] not in ("Const", "Identity")]
        # A node TensorRT splits over several kernels is in "a kernel" once.
        places = [*{n for k in verdict.kernels for n in k.nodes}, *verdict.shape_nodes,
                  *verdict.removed_nodes]
        assert all(places.count(n) <= 1 for n in nodes), (name, places)
        accounted = sum(n in places for n in nodes)
        assert accounted >= 0.95 * len(nodes), (name, set(nodes) - set(places))
        shape_ops |= {ops[n] for n in verdict.shape_nodes}
        assert "Shape" not in {ops[n] for n in verdict.removed_nodes}
        assert verdict.to_json()["shape_nodes"] == list(verdict.shape_nodes)
    assert {"Shape", "GatherV2", "Prod", "ConcatV2"} <= shape_ops
    kinds = {k.type for v in verdicts.values() for k in v.kernels}
    assert "gemm" in kinds or "runtime_fusion" in kinds, kinds


def test_cli_json_kernels_have_the_contracts_keys(tmp_path):
    done = run_cli("convert", str(sample_models.build("digits_cnn")), "--json", "--tensorrt",
                   env={"WORKBENCH_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    for engine in json.loads(done.stdout)["engines"]:
        kernels = engine["tensorrt"]["kernels"]
        assert kernels and all(list(k) == list(KERNEL_JSON_KEYS) for k in kernels)
        nodes = [n for k in kernels for n in k["nodes"]]
        assert nodes and all(n.startswith("StatefulPartitionedCall/") for n in nodes)
        shapes = [t["shape"] for k in kernels for t in k["inputs"] + k["outputs"]]
        assert shapes and all(isinstance(d, int) for s in shapes for d in s)


# --- the same view from a GPU's engine inspector (trtexec --exportLayerInfo) ------------------

FIXTURES = fixtures_dir()


@pytest.mark.skipif(FIXTURES is None, reason="needs ../shared/fixtures/trtexec")
def test_trtexec_layer_info_gives_the_same_kernel_table():
    assert FIXTURES is not None
    anatomy = read_trtexec_kernels(FIXTURES / "keras-resnet50-rtx3090-fp32" / "engine.graph.json")
    table = anatomy.table()
    assert list(table.columns) == KERNEL_COLUMNS and len(table) == 103
    fused = table[table.kernel == "resnet50/conv2_block1_1_conv/Conv2D + "
                                  "resnet50/conv2_block1_1_relu/Relu"].iloc[0]
    assert fused.type == "CaskConvolution"
    assert fused.nodes == ["resnet50/conv2_block1_1_conv/Conv2D",
                           "resnet50/conv2_block1_1_relu/Relu"]
    assert fused.input_shapes == [(32, 64, 56, 56)] and fused.output_dtypes == ["FP32"]
    assert fused.constant_shapes == [(64, 64, 1, 1), (64,)]  # its weights and bias
    conv = next(k for k in anatomy.kernels if k.name == fused.kernel)
    assert conv.parameters["Stride"] == [1, 1] and conv.parameters["Activation"] == "RELU"
    reformats = table[table.type == "Reformat"]
    assert len(reformats) and all(nodes == [] for nodes in reformats.nodes)
    # TensorRT 10's inspector names each layer's ONNX nodes in its metadata.
    controlnet = read_trtexec_kernels(FIXTURES / "controlnet-a10-fp16" / "layerinfo.json")
    first = controlnet.kernels[1]
    assert first.onnx_nodes == ("/Unsqueeze",) and first.outputs[0].dtype == "INT32"
