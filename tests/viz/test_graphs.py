"""Segment graphs: the converted top level, the three Graphviz views, SVG and TF-TRT's export."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import graphviz
import pytest

import sample_models
from workbench import trt_convert as trt
from workbench.conversion.candidates import REASON_EXCLUDED
from workbench.conversion.converted import converted_top_level, tftrt_dot
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, EngineInfo, UnconvertedNode
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.graph.nodes import Graph, Node, TensorRef
from workbench.viz import graphs
from workbench.viz.style import category_color, engine_color, reason_category

SVG = "{http://www.w3.org/2000/svg}"
_SESSIONS: dict[str, ConversionSession] = {}


def session_for(name: str) -> ConversionSession:
    if name not in _SESSIONS:
        _SESSIONS[name] = ConversionSession.open(sample_models.build(name))
    return _SESSIONS[name]


def node(name: str, op: str, *inputs: str, control: tuple[str, ...] = (), **attrs) -> Node:
    return Node(0, name, op, inputs=[TensorRef.parse(i) for i in inputs],
                control_inputs=list(control), raw_attrs=attrs)


# A small hand-made conversion: x -> [w, conv, bias, relu] engine -> erfc -> [mul] engine2 -> y.
GRAPH = Graph([
    node("x", "Placeholder", dtype="float"),
    node("w", "Const", dtype="float"),
    node("net/conv", "Conv2D", "x", "w", T="float"),
    node("b", "Const", dtype="float"),
    node("net/bias", "BiasAdd", "net/conv", "b", T="float"),
    node("net/id", "Identity", "net/bias", T="float"),
    node("net/relu", "Relu", "net/id", T="float"),
    node("net/erfc", "Erfc", "net/relu", T="float"),
    node("k", "Const", dtype="float"),
    node("net/mul", "Mul", "net/erfc", "k", T="float"),
    node("shared", "Const", dtype="float"),
    node("net/add", "AddV2", "net/mul", "shared", T="float"),
    node("net/sub", "Sub", "net/erfc", "shared", T="float"),
    node("y", "Identity", "net/add", T="float"),
    node("z", "Identity", "net/sub", T="float"),
])


def engine(name: str, nodes: tuple[str, ...], count: int, inputs: tuple[str, ...],
           outputs: tuple[str, ...]) -> EngineInfo:
    return EngineInfo(name, nodes, {}, count, len(nodes), ("float32",), ("float32",),
                      ((-1, 4),), ((-1, 4),), inputs, outputs)


RESULT = ConversionResult(
    params=ConversionParams(precision_mode="FP16"),
    engines=[
        engine("TRTEngineOp_000_000", ("net/bias", "net/conv", "net/id", "net/relu", "w"), 6,
               ("x:0",), ("net/relu:0",)),
        engine("TRTEngineOp_000_001", ("net/add", "net/mul"), 4, ("net/erfc:0",),
               ("net/add:0",)),
    ],
    unconverted=[
        UnconvertedNode("x", "Placeholder", REASON_EXCLUDED),
        UnconvertedNode("net/erfc", "Erfc", "Op type Erfc is not supported."),
        UnconvertedNode("shared", "Const", "removed at its boundary", False),
        UnconvertedNode("net/sub", "Sub", "1 effective nodes < minimum_segment_size 3", False),
        UnconvertedNode("y", "Identity", REASON_EXCLUDED),
        UnconvertedNode("z", "Identity", REASON_EXCLUDED),
        UnconvertedNode("b", "Const", "a Const left outside", False),
        UnconvertedNode("k", "Const", "a Const left outside", False),
    ],
    nonconversion={},
    # x, erfc, shared, sub, y, z stay; b and k die (all their consumers are in engines).
    not_converted_top_level=6,
)


# --- the converted top level ---------------------------------------------------------------

def test_converted_top_level_replaces_segments_and_prunes_dead_consts() -> None:
    converted = converted_top_level(GRAPH, RESULT)
    names = [n.name for n in converted.nodes]
    assert names == ["x", "net/erfc", "shared", "net/sub", "y", "z",
                     "TRTEngineOp_000_000", "TRTEngineOp_000_001"]
    assert len(names) == RESULT.not_converted_top_level + len(RESULT.engines)
    by_name = {n.name: n for n in converted.nodes}
    assert by_name["TRTEngineOp_000_000"].inputs == ("x",)
    assert by_name["TRTEngineOp_000_000"].node_count == 6
    assert by_name["net/erfc"].inputs == ("TRTEngineOp_000_000",)
    # `shared` feeds an engine (copied in as weights) and net/sub: kept, edge only to net/sub.
    assert ("shared", "net/sub") in converted.edges
    assert ("shared", "TRTEngineOp_000_001") not in converted.edges
    assert by_name["y"].inputs == ("TRTEngineOp_000_001",)
    assert converted.owner["net/mul"] == "TRTEngineOp_000_001" and "k" not in converted.owner


@pytest.mark.slow
@pytest.mark.parametrize("name", sample_models.NAMES)
@pytest.mark.parametrize("dynamic", [False, True])
def test_converted_node_count_matches_the_summary(name: str, dynamic: bool) -> None:
    session = session_for(name)
    params = ConversionParams(use_dynamic_shape=dynamic, minimum_segment_size=1 + 2 * dynamic)
    result = session.convert(params)
    converted = converted_top_level(session.prepared().graph, result)
    assert len(converted.nodes) == result.not_converted_top_level + len(result.engines)
    assert [n.name for n in converted.engines] == [e.name for e in result.engines]
    assert sum(n.node_count for n in converted.engines) == result.converted_nodes


# --- TF-TRT's export -------------------------------------------------------------------------

def test_tftrt_export_has_tftrt_layout() -> None:
    text = tftrt_dot(converted_top_level(GRAPH, RESULT))
    assert text == tftrt_dot(converted_top_level(GRAPH, RESULT))
    lines = text.splitlines()
    assert lines[0] == "digraph tftrt_converted_graph {"
    assert "  node [style=filled height=0.55 colorscheme=set312 shape=box];" in lines
    # Colour indices by compute dtype, first seen first: Placeholder float32 is 1; engines take
    # precision_mode (FP16 -> float16) as the next new dtype.
    assert '    "x" [label=<<b>Placeholder</b>  <br/><i>device:Unspecified</i>> fillcolor=1];' \
        in lines
    assert ('    "TRTEngineOp_000_000" [label=<<b>TRTEngineOp_000_000 [6]</b>  '
            "<br/><i>device:GPU:0</i>> fillcolor=2];") in lines
    assert '  "TRTEngineOp_000_000" -> "net/erfc";' in lines
    assert "    float32 [fillcolor=1 label=<<b>float32</b>>];" in lines
    assert "    float16 [fillcolor=2 label=<<b>float16</b>>];" in lines
    # Invisible legend edges go to every node without inputs (x and shared).
    assert '  "float16" -> "x"' in lines and '  "float16" -> "shared"' in lines
    assert text.count("->") == sum(len(n.inputs) for n in
                                   converted_top_level(GRAPH, RESULT).nodes) + 2 * 2


@pytest.mark.slow
def test_export_env_var_writes_the_dot_through_the_converter(tmp_path, monkeypatch) -> None:
    path = tmp_path / "converted.dot"
    monkeypatch.setenv("TF_TRT_EXPORT_GRAPH_VIZ_PATH", str(path))
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=sample_models.build("detector"))
    converter.convert()
    text = path.read_text()
    result = converter.result
    assert text.startswith("digraph tftrt_converted_graph {")
    for e in result.engines:
        assert f"<b>{e.name} [{e.native_node_count}]</b>" in text
    drawn = re.findall(r'^    "[^"]+" \[label=', text, flags=re.M)
    assert len(drawn) == result.not_converted_top_level + len(result.engines)
    rendered = subprocess.run(["dot", "-Tsvg", str(path)], capture_output=True, check=True)
    ET.fromstring(rendered.stdout)


# --- the views -------------------------------------------------------------------------------

def test_full_graph_colours_engines_and_reasons_with_a_legend() -> None:
    source = graphs.full_graph(GRAPH, RESULT).source
    for index, e in enumerate(RESULT.engines):
        assert f"subgraph cluster_{e.name} {{" in source
        assert engine_color(index) in source
    # Weight Consts are folded, the Identity inside the engine collapses, outputs stay.
    assert _drawn(source) == {"x", "net/conv", "net/bias", "net/relu", "net/erfc", "net/mul",
                              "net/add", "net/sub", "y", "z", graphs.LEGEND}
    assert {("net/bias", "net/relu"), ("net/relu", "net/erfc"), ("x", "net/conv")} <= \
        _edge_set(source)
    erfc = _node_line(source, "net/erfc")
    assert category_color("op not supported") in erfc and "Op type Erfc is not supported." in erfc
    assert category_color("segment too small") in _node_line(source, "net/sub")
    legend = _node_line(source, graphs.LEGEND)
    assert "TRTEngineOp_000_000 [6]" in legend and "op not supported (1)" in legend
    # A short key stays one narrow column (diagrams shown side by side in the docs).
    assert '<td align="left">TRTEngineOp_000_000 [6]</td></tr>' in legend


def test_a_long_key_puts_engines_and_reasons_side_by_side() -> None:
    """Half as tall, so the first view of a many-engine model shows the graph, not the key."""
    dot = graphviz.Digraph()
    graphs._legend(dot, RESULT.engines, {f"reason {n}": n for n in range(1, 6)}, "key")
    legend = _node_line(dot.source, graphs.LEGEND)
    assert re.search(r'TRTEngineOp_000_000 \[6\]</td><td bgcolor="[^"]+" width="14"></td>'
                     r'<td align="left">not converted: reason 5 \(5\)</td></tr>', legend)
    assert legend.count("<tr>") == 1 + 5  # the caption, then the longer column's rows


def test_converted_graph_draws_each_engine_as_one_node_with_its_count() -> None:
    source = graphs.converted_graph(GRAPH, RESULT).source
    assert "TRTEngineOp_000_000\n[6 nodes]" in source
    assert "TRTEngineOp_000_001\n[4 nodes]" in source
    assert "cluster_" not in source
    # `shared` is a weight Const feeding net/sub: folded in the drawing.
    assert _drawn(source) == {"x", "net/erfc", "net/sub", "y", "z", "TRTEngineOp_000_000",
                              "TRTEngineOp_000_001", graphs.LEGEND}
    assert _edge_set(source) == {("x", "TRTEngineOp_000_000"),
                                 ("TRTEngineOp_000_000", "net/erfc"),
                                 ("net/erfc", "TRTEngineOp_000_001"), ("net/erfc", "net/sub"),
                                 ("TRTEngineOp_000_001", "y"), ("net/sub", "z")}


def test_engine_graph_contains_exactly_its_engine() -> None:
    dot = graphs.engine_graph(GRAPH, RESULT, "TRTEngineOp_000_000")
    drawn = _drawn(dot.source)
    assert drawn - {"engine_input_0", "engine_output_0"} == set(RESULT.engines[0].nodes)
    edges = _edge_set(dot.source)
    assert {("engine_input_0", "net/conv"), ("net/relu", "engine_output_0")} <= edges
    assert "input 0" in dot.source and "output 0" in dot.source
    with pytest.raises(WorkbenchError, match="no engine named"):
        graphs.engine_graph(GRAPH, RESULT, "TRTEngineOp_000_009")


def test_reason_categories() -> None:
    assert reason_category("Op type Erfc is not supported.") == "op not supported"
    assert reason_category("excluded by segmenter option. Most likely an input or output "
                           "node.") == "input/output"
    assert reason_category("Unsupported tensorflow data type uint8") == "dtype"
    assert reason_category("2 effective nodes < minimum_segment_size 3") == "segment too small"
    assert reason_category("Cannot Convert Bilinear Resize when align_corners=False") == \
        "op settings"


# --- rendering -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "tiny_bert"])
def test_views_render_to_svg_fast(name: str) -> None:
    session = session_for(name)
    result = session.convert(ConversionParams())
    graph = session.prepared().graph
    for view, budget_s in ((graphs.converted_graph, 0.5), (graphs.full_graph, 3.0)):
        start = time.perf_counter()
        svg = graphs.to_svg(view(graph, result))
        elapsed = time.perf_counter() - start
        root = ET.fromstring(svg)
        titles = {t.text for t in root.iter(f"{SVG}title")}
        for e in result.engines:
            assert e.name in titles or f"cluster_{e.name}" in titles
        assert elapsed <= budget_s, f"{view.__name__} took {elapsed:.2f} s"
    biggest = max(result.engines, key=lambda e: len(e.nodes))
    svg = graphs.to_svg(graphs.engine_graph(graph, result, biggest.name))
    titles = {t.text for t in ET.fromstring(svg).iter(f"{SVG}title")}
    assert set(biggest.nodes) <= titles


def test_full_view_collapses_engines_above_the_node_budget(monkeypatch) -> None:
    monkeypatch.setattr(graphs, "NODE_BUDGET", 8)  # 10 drawn without collapsing
    source = graphs.full_graph(GRAPH, RESULT).source
    assert "cluster_TRTEngineOp_000_000" not in source  # the larger engine collapsed first
    assert "TRTEngineOp_000_000\n[6 nodes] (collapsed)" in source
    assert "cluster_TRTEngineOp_000_001" in source
    assert ("x", "TRTEngineOp_000_000") in _edge_set(source)


def test_missing_dot_is_a_one_line_error() -> None:
    code = ("import graphviz, os; from workbench.viz.graphs import to_svg\n"
            "os.environ['PATH'] = ''\n"
            "try:\n    to_svg(graphviz.Digraph())\n"
            "except Exception as e:\n    print(type(e).__name__, '|', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, check=True).stdout
    assert out.startswith("WorkbenchError | ") and "install Graphviz" in out
    assert len(out.strip().splitlines()) == 1


def test_dot_timeout_is_a_workbench_error() -> None:
    big = graphs.full_graph(GRAPH, RESULT)
    with pytest.raises(WorkbenchError, match="took more than"):
        graphs.to_svg(big, timeout_s=1e-4)


def _node_line(source: str, name: str) -> str:
    """The statement declaring node `name` (attributes may span lines inside quotes)."""
    match = re.search(rf'^\t+"?{re.escape(name)}"? \[.*?\]$', source, flags=re.M | re.S)
    assert match, f"{name} not drawn"
    return match.group(0)


def _drawn(source: str) -> set[str]:
    """Names of the nodes a DOT source declares."""
    names = {m[1] for m in re.findall(r'^\t+("?)([^"\s\[]+)\1 \[', source, flags=re.M)}
    return names - {"graph", "node", "edge"}


def _edge_set(source: str) -> set[tuple[str, str]]:
    pairs = re.findall(r'^\t+"?([^"\s]+)"? -> "?([^"\s]+)"?', source, flags=re.M)
    return set(pairs)


def test_views_collapse_connected_unconverted_regions_after_engines(monkeypatch) -> None:
    monkeypatch.setattr(graphs, "NODE_BUDGET", 5)  # both engines collapsed still draw 7
    source = graphs.full_graph(GRAPH, RESULT).source
    region = "unconverted_region_0"
    assert _drawn(source) == {"x", "y", "TRTEngineOp_000_000", "TRTEngineOp_000_001", region,
                              graphs.LEGEND}
    assert _edge_set(source) == {("x", "TRTEngineOp_000_000"), ("TRTEngineOp_000_000", region),
                                 (region, "TRTEngineOp_000_001"), ("TRTEngineOp_000_001", "y")}
    assert "not converted\n[3 nodes]" in source
    legend = _node_line(source, graphs.LEGEND)
    assert "op not supported (1)" in legend and "segment too small (1)" in legend
    converted = graphs.converted_graph(GRAPH, RESULT).source
    assert region in _drawn(converted) and "net/erfc" not in _drawn(converted)


def test_labels_are_short_and_say_more_than_the_op() -> None:
    assert graphs._short_label("Conv2D", "model/conv1_conv/convolution") == "Conv2D\nconv1_conv"
    assert graphs._short_label("Relu", "model/block1/relu_3") == "Relu\nblock1"
    assert graphs._short_label("Mul", "StatefulPartitionedCall/Mul") == "Mul\nMul"
    assert graphs._short_label("AddV2", "a/residual_add") == "AddV2\nresidual_add"
    assert graphs._short_label("Cast", "x/" + "n" * 40).endswith("…")


def test_without_engines_every_node_stays_top_level() -> None:
    unconverted = [UnconvertedNode(n.name, n.op, "minimum_segment_size=-1: TF-TRT does not "
                                   "convert the main graph", False) for n in GRAPH.real_nodes]
    result = ConversionResult(ConversionParams(minimum_segment_size=-1), [], unconverted, {},
                              len(GRAPH.real_nodes))
    converted = converted_top_level(GRAPH, result)
    assert [n.name for n in converted.nodes] == [n.name for n in GRAPH.real_nodes]
    assert "cluster_" not in graphs.full_graph(GRAPH, result).source
    assert "TRTEngineOp" not in tftrt_dot(converted_top_level(GRAPH, result))
