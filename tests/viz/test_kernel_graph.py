"""The engine as TensorRT built it, drawn with Graphviz's real `dot`: from a GPU's inspector
JSON (trtexec fixtures) and from TensorRT-RTX's build of a small network."""

from __future__ import annotations

import re

from conftest import fixture_path

from workbench.engines.inspection.tensorrt_kernels import KernelTensor
from workbench.profiling.trtexec import read_trtexec_kernels
from workbench.viz.graphs import to_svg
from workbench.viz.kernel_graph import kernel_color, kernel_graph


def test_trtexec_engine_draws_kernels_holding_their_tf_nodes_and_shaped_tensors():
    anatomy = read_trtexec_kernels(
        fixture_path("keras-resnet50-rtx3090-fp16") / "engine.graph.json")
    svg = to_svg(kernel_graph(anatomy))
    drawn = [k for k in anatomy.kernels if k.inputs or k.outputs]
    assert svg.count('class="node"') == len(drawn) + 2  # the kernels, one input, one output
    # Vertical fusion shown: one box holds a convolution and its ReLU.
    assert re.search(r"CaskConvolution.*?Conv2D\s+conv2_block1_1_conv.*?Relu\s+"
                     r"conv2_block1_1_relu", svg.replace("&#160;", " "), re.S)
    # Every tensor between kernels is an edge labelled with its shape and datatype.
    edges = svg.count('class="edge"')
    assert edges >= len(drawn) and svg.count("32x64x56x56 FP16") >= 5
    assert "32x224x224x3 FP32" in svg  # the engine's input, before the FP16 copy


def test_json_kernels_draw_too_with_engine_inputs_and_outputs():
    kernels = [
        {"name": "k0", "type": "correlation", "nodes": ["m/conv", "m/relu"],
         "inputs": [{"name": "x:0", "shape": [-1, 3, 8, 8], "dtype": "FP32", "format": "NCHW"}],
         "outputs": [{"name": "t", "shape": [-1, 8, 8, 8], "dtype": "FP16", "format": "NHWC"}]},
        {"name": "k1", "type": "shape_call", "nodes": [], "inputs": [], "outputs": []},
        {"name": "k2", "type": "gemm", "nodes": ["m/dense/MatMul"],
         "inputs": [{"name": "t", "shape": [-1, 8, 8, 8], "dtype": "FP16", "format": "NHWC"}],
         "outputs": [{"name": "y:0", "shape": [-1, 10], "dtype": "FP32", "format": "linear"}]},
    ]
    dot = kernel_graph(kernels, engine="tiny")
    svg = to_svg(dot)
    assert svg.count('class="node"') == 4 and svg.count('class="edge"') == 3
    assert "?x8x8x8 FP16" in svg and "?x10 FP32" in svg
    assert "not drawn: 1 without tensors" in dot.source
    assert "tiny: 2 kernels holding 3 TF nodes" in dot.source
    # The title on two lines, so it fits the app's drawing at its first zoom.
    titles = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert "tiny: 2 kernels holding 3 TF nodes" in titles, titles
    # The TF nodes in no kernel: shape arithmetic and removed nodes, each a note, counted.
    one = to_svg(kernel_graph(kernels[2:], engine="one", removed=["m/id"],
                              shape_nodes=["m/Shape", "m/Prod"]))
    assert "one: 1 kernel holding 1 TF node" in one
    assert "shape nodes, computed from tensor shapes: 2 TF nodes" in one
    assert "removed by TensorRT: 1 TF node<" in one
    assert KernelTensor("t", (-1, 8), "FP16", "NHWC").to_json()["shape"] == [-1, 8]
    assert kernel_color("correlation") != kernel_color("gemm") != kernel_color("kgen")


def test_kernel_chart_groups_shape_calls_and_syncs_into_one_row():
    import pandas as pd

    from workbench.viz.estimate_charts import TOP_KERNELS, kernel_estimate_chart

    rows = pd.DataFrame(
        [{"engine": "e", "layer": f"__mye{i}_0_myl0_0", "layer_type": "shape_call",
          "estimated_ms": 0.0} for i in range(13)]
        + [{"engine": "e", "layer": "[ShapeHostToDeviceCopy 0]",
            "layer_type": "ShapeHostToDevice", "estimated_ms": 0.0},
           {"engine": "e", "layer": "__myl_FcAdd_myl0_2", "layer_type": "runtime_fusion",
            "estimated_ms": 0.02}])
    figure = kernel_estimate_chart(rows, "T4", "estimated for T4")
    (bars,) = figure.data
    assert list(bars.y) == ["__myl_FcAdd_myl0_2", "shape calls / syncs (14 kernels)"]
    assert "costliest first;" in figure.layout.title.text  # not "2 kernels": 14 are grouped
    many = pd.DataFrame([{"engine": "e", "layer": f"conv{i}", "layer_type": "convolution",
                          "estimated_ms": 0.01 * (i + 1)} for i in range(TOP_KERNELS + 1)])
    cut = kernel_estimate_chart(many, "T4", "estimated for T4")
    assert f"the {TOP_KERNELS} costliest of {TOP_KERNELS + 1} kernels;" in cut.layout.title.text
