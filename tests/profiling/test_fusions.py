"""Expected TensorRT fusions (best-practices guide §2.5) and matching them to a real profile."""

from __future__ import annotations

import numpy as np
import pytest
from random_graphs import graph_of, node

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.profiling import combine, layer_table
from workbench.profiling.fusions import expected_fusions, match_fusions


def const(name: str, value, shape=(8,)):
    n = node(name, "Const", shape=shape)
    n.raw_attrs = {"value": np.asarray(value, dtype=np.float32)}
    return n


def op(name: str, kind: str, *inputs: str, shape=(-1, 8), **attrs):
    n = node(name, kind, inputs, shape=shape)
    n.raw_attrs = dict(attrs)
    return n


def engines(graph, *groups, outputs=()):
    """A ConversionResult whose engines hold the named nodes (plus every Const)."""
    consts = [n.name for n in graph.real_nodes if n.op == "Const"]
    found = []
    for index, names in enumerate(groups):
        found.append(EngineInfo(f"TRTEngineOp_000_{index:03d}", tuple(sorted([*names, *consts])),
                                {}, 0, 0, (), (), (), (), (), tuple(outputs)))
    return ConversionResult(ConversionParams(), found, [], {}, 0)


def fusions(graph, *groups, outputs=()):
    return expected_fusions(graph, engines(graph, *groups, outputs=outputs))


def conv_block():
    return graph_of(
        node("x", "Placeholder"), const("w", np.ones(8)), const("b", np.ones(8)),
        op("conv", "Conv2D", "x", "w"), op("bias", "BiasAdd", "conv", "b"),
        op("relu", "Relu", "bias"), op("out", "Identity", "relu"),
    )


def test_convolution_scale_relu_is_one_fusion():
    table = fusions(conv_block(), ["conv", "bias", "relu"])
    assert table["fusion"].tolist() == ["Convolution + Scale + ReLU"]
    assert table["tf_nodes"].tolist() == [["conv", "bias", "relu"]]
    assert table["guide"].iloc[0] == "Convolution and Scale; Convolution and ReLU Activation"
    assert table["engine"].iloc[0] == "TRTEngineOp_000_000"


def test_no_fusion_across_an_engine_boundary_or_an_engine_output():
    assert fusions(conv_block(), ["conv", "bias"])["fusion"].tolist() == ["Convolution + Scale"]
    assert fusions(conv_block(), ["conv", "bias", "relu"], outputs=["bias:0"])[
        "fusion"].tolist() == ["Convolution + Scale"]
    assert fusions(conv_block(), ["conv"]).empty


def test_a_second_reader_keeps_the_intermediate_and_stops_the_fusion():
    graph = graph_of(
        node("x", "Placeholder"), const("w", np.ones(8)),
        op("conv", "Conv2D", "x", "w"), op("relu", "Relu", "conv"), op("tanh", "Tanh", "conv"),
    )
    assert fusions(graph, ["conv", "relu", "tanh"]).empty


def test_identity_between_layers_is_transparent():
    graph = graph_of(
        node("x", "Placeholder"), const("w", np.ones(8)), op("conv", "Conv2D", "x", "w"),
        op("id", "Identity", "conv"), op("relu", "Relu", "id"),
    )
    assert fusions(graph, ["conv", "id", "relu"])["tf_nodes"].tolist() == [["conv", "relu"]]


def test_residual_sum_goes_to_the_first_convolution_only():
    graph = graph_of(
        node("x", "Placeholder"), const("w", np.ones(8)), const("b", np.ones(8)),
        op("conv_a", "Conv2D", "x", "w"), op("bias_a", "BiasAdd", "conv_a", "b"),
        op("conv_b", "Conv2D", "x", "w"), op("bias_b", "BiasAdd", "conv_b", "b"),
        op("add", "AddV2", "bias_a", "bias_b"), op("relu", "Relu", "add"),
    )
    table = fusions(graph, ["conv_a", "bias_a", "conv_b", "bias_b", "add", "relu"])
    assert table["fusion"].tolist() == ["Convolution + Scale + ElementWise Sum + ReLU",
                                        "Convolution + Scale"]
    assert table["tf_nodes"].iloc[0] == ["conv_a", "bias_a", "add", "relu"]


def test_broadcasting_add_is_not_a_fusable_sum():
    graph = graph_of(
        node("x", "Placeholder"), node("y", "Placeholder", shape=(-1, 1)), const("w", 1.0),
        op("conv", "Conv2D", "x", "w"), op("add", "AddV2", "conv", "y"), op("relu", "Relu", "add"),
    )
    assert fusions(graph, ["conv", "add", "relu"]).empty


def test_mlp_chain_counts_its_matmuls():
    graph = graph_of(
        node("x", "Placeholder"), const("w", np.ones((8, 8))), const("b", np.ones(8)),
        op("mm1", "MatMul", "x", "w"), op("b1", "BiasAdd", "mm1", "b"), op("r1", "Relu", "b1"),
        op("mm2", "MatMul", "r1", "w"), op("b2", "BiasAdd", "mm2", "b"),
        op("soft", "Softmax", "b2"),
    )
    table = fusions(graph, ["mm1", "b1", "r1", "mm2", "b2", "soft"])
    assert table["fusion"].tolist() == ["2-layer MLP: MatMul + Scale + ReLU + MatMul + Scale"]
    assert table["rule"].tolist() == ["MLP"]
    assert "soft" not in table["tf_nodes"].iloc[0]


@pytest.mark.parametrize("ops, rule", [
    (["Square", "Sum", "Sqrt"], "L2Norm"),
    (["Square", "Sum"], "Sum of Square"),
    (["Abs", "Sum"], "L1Norm"),
    (["Exp", "Sum", "Log"], "LogSumExp"),
    (["Sum", "Log"], "LogSum"),
])
def test_reduction_fusions(ops, rule):
    nodes = [node("x", "Placeholder"), const("axis", [1], shape=(1,))]
    previous = "x"
    for index, kind in enumerate(ops):
        inputs = (previous, "axis") if kind == "Sum" else (previous,)
        nodes.append(op(f"n{index}", kind, *inputs))
        previous = f"n{index}"
    table = fusions(graph_of(*nodes), [f"n{i}" for i in range(len(ops))])
    assert table["rule"].tolist() == [rule]


def test_square_as_a_product_with_itself():
    graph = graph_of(node("x", "Placeholder"), const("axis", [1], shape=(1,)),
                     op("sq", "Mul", "x", "x"), op("sum", "Sum", "sq", "axis"))
    assert fusions(graph, ["sq", "sum"])["rule"].tolist() == ["Sum of Square"]


def test_shuffles_reduce_pooling_and_erased_scales():
    image = (-1, 7, 7, 8)
    graph = graph_of(
        node("x", "Placeholder", shape=image), const("perm", [0, 1, 2, 3], shape=(4,)),
        const("hw", [1, 2], shape=(2,)), const("one", 1.0, shape=()),
        op("t1", "Transpose", "x", "perm", shape=image), op("t2", "Transpose", "t1", "perm",
                                                           shape=image),
        op("t3", "Transpose", "x", "perm", shape=image),
        op("keep", "Mean", "t3", "hw", shape=(-1, 1, 1, 8), keep_dims=True),
        op("gap", "Mean", "x", "hw", shape=(-1, 8), keep_dims=False),
        op("times_one", "Mul", "gap", "one"),
    )
    table = fusions(graph, ["t1", "t2", "t3", "keep", "gap", "times_one"])
    assert dict(zip(table["rule"], table["tf_nodes"], strict=True)) == {
        "Shuffle and Shuffle": ["t1", "t2"],
        "Shuffle and Reduce": ["t3", "keep"],
        "Reduce as Pooling": ["gap"],
        "Scale erased": ["times_one"],
    }


# --- Matching a profile --------------------------------------------------------------------

def test_match_fusions_per_run_and_status():
    graph = graph_of(
        node("x", "Placeholder"), const("w", np.ones(8)), const("b", np.ones(8)),
        op("m/conv_a/Conv2D", "Conv2D", "x", "w"), op("m/relu_a/Relu", "Relu", "m/conv_a/Conv2D"),
        op("m/conv_b/Conv2D", "Conv2D", "m/relu_a/Relu", "w"),
        op("m/bias_b/BiasAdd", "BiasAdd", "m/conv_b/Conv2D", "b"),
        op("m/conv_c/Conv2D", "Conv2D", "m/bias_b/BiasAdd", "w"),
        op("m/relu_c/Relu", "Relu", "m/conv_c/Conv2D"),
    )
    expected = fusions(graph, [n.name for n in graph.real_nodes if n.op != "Placeholder"])
    assert len(expected) == 3
    fused = layer_table([
        {"layer": "m/conv_a/Conv2D + m/relu_a/Relu", "avg_ms": 2.0},
        {"layer": "Reformatting CopyNode for Input Tensor 0 to m/conv_b/Conv2D", "avg_ms": 0.5},
        {"layer": "m/conv_b/Conv2D", "avg_ms": 1.0},
        {"layer": "m/bias_b/BiasAdd", "avg_ms": 0.25},
    ], "fp16", "trtexec", "GPU")
    native = layer_table([{"layer": "TF op", "avg_ms": 1, "tf_nodes": ["m/relu_c/Relu"]}],
                         "tf", "tensorflow", "CPU")
    table = match_fusions(expected, combine([fused, native]))
    fp16 = table[table["run"] == "fp16"]
    assert fp16["status"].tolist() == ["one layer", "split over 2 layers", "not in profile"]
    assert fp16["layers"].iloc[1] == ["m/conv_b/Conv2D", "m/bias_b/BiasAdd"]
    assert fp16["layer_ms"].tolist() == [2.0, 1.25, 0.0]
    tf = table[table["run"] == "tf"]
    assert tf["status"].tolist() == ["not in profile", "not in profile", "one layer"]


@pytest.mark.slow
def test_resnet50_fusions_match_the_rtx3090_fp32_engine():
    from conftest import fixture_path

    import sample_models
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.session import ConversionSession
    from workbench.profiling import read_trtexec_dir

    folder = fixture_path("keras-resnet50-rtx3090-fp32")
    session = ConversionSession.open(sample_models.build("resnet50"))
    result = session.convert(ConversionParams())
    graph = session.prepared("FP32").graph
    expected = expected_fusions(graph, result)
    counts = expected["fusion"].value_counts().to_dict()
    # 53 convolutions: 16 with the residual sum, 4 projection/last convs with only BN/bias.
    assert counts["Convolution + Scale + ElementWise Sum + ReLU"] == 16
    assert sum(v for k, v in counts.items() if k.startswith("Convolution")) == 53
    matched = match_fusions(expected, read_trtexec_dir(folder, graph=graph))
    assert (matched["status"] == "one layer").sum() >= 50
    residual = matched[matched["tf_nodes"].map(
        lambda nodes: nodes[0].endswith("conv2_block1_0_conv_1/convolution"))].iloc[0]
    assert residual["layers"] == ["resnet50/conv2_block1_0_conv/Conv2D + "
                                  "resnet50/conv2_block1_add/add + resnet50/conv2_block1_out/Relu"]
