"""Segment graphs by name scope: the hierarchy (groups, series, open state, search, report rows),
its drawing, `workbench graph`, and real architectures' first views within 60 boxes."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import sample_models
from workbench import cli
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, EngineInfo, UnconvertedNode
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.graph.nodes import Graph, Node, TensorRef
from workbench.viz.graphs import to_svg
from workbench.viz.hierarchy import (
    ROOT,
    TOP_BOXES,
    ScopeTree,
    find,
    focus_on_engine,
    focus_on_row,
)
from workbench.viz.overlays import engine_overlays
from workbench.viz.scope_graphs import FRAME, GROUP_BOX, HIGHLIGHT, scope_drawing

SVG = "{http://www.w3.org/2000/svg}"


def node(name: str, op: str, *inputs: str) -> Node:
    return Node(0, name, op, inputs=[TensorRef.parse(i) for i in inputs], raw_attrs={"T": "float"})


def chain_model(blocks: int = 30) -> tuple[Graph, ConversionResult]:
    """x -> model/block_i/{conv, relu} for every block -> model/head/Erfc -> y, weights per
    conv; every block in one engine except the head's Erfc (op not supported)."""
    nodes = [node("x", "Placeholder")]
    previous = "x"
    for i in range(1, blocks + 1):
        scope = f"wrap/model/block_{i}"
        nodes += [node(f"{scope}/kernel", "Const"),
                  node(f"{scope}/conv", "Conv2D", previous, f"{scope}/kernel"),
                  node(f"{scope}/relu", "Relu", f"{scope}/conv")]
        previous = f"{scope}/relu"
    nodes += [node("wrap/model/head/Erfc", "Erfc", previous),
              node("wrap/model/head/out", "Relu", "wrap/model/head/Erfc"), node("y", "Identity",
                                                                                "wrap/model/head/out")]
    graph = Graph(nodes)
    members = tuple(n.name for n in nodes if n.name.startswith("wrap/model/block_"))
    engine = EngineInfo("TRTEngineOp_000_000", members, {"Conv2D": blocks}, len(members),
                        2 * blocks, ("float32",), ("float32",), (None,), (None,),
                        inputs=("x:0",), outputs=(f"{previous}:0",))
    unconverted = [UnconvertedNode("wrap/model/head/Erfc", "Erfc", "Erfc is not supported"),
                   UnconvertedNode("wrap/model/head/out", "Relu",
                                   "segment of 1 nodes < minimum_segment_size", False),
                   UnconvertedNode("x", "Placeholder", "excluded by segmenter option"),
                   UnconvertedNode("y", "Identity", "excluded by segmenter option")]
    result = ConversionResult(ConversionParams(), [engine], unconverted,
                              {"Erfc": {"Erfc is not supported": 1}}, 4)
    return graph, result


def test_scopes_merge_chains_and_group_series_of_blocks():
    graph, result = chain_model()
    tree = ScopeTree.build(graph, result)
    (top,) = tree.groups[ROOT].children  # wrap/model: one chain, one group
    assert tree.groups[top].label == "wrap/model" and tree.groups[top].nodes == 92
    series = [g for g in tree.groups.values() if g.kind == "series"]
    # 31 siblings (30 blocks and the head) are more than fit: blocks by name prefix.
    assert [g.label for g in series] == ["block_* ×30"]
    assert series[0].converted == 90 and series[0].engines == {"TRTEngineOp_000_000": 90}
    head = tree.groups["wrap/model/head"]
    assert head.main_reason == "op not supported" and head.converted == 0
    assert sorted(tree.nodes_under(ROOT)) == sorted(n.name for n in graph.real_nodes)


def test_open_state_breadcrumb_and_first_view():
    graph, result = chain_model()
    tree = ScopeTree.build(graph, result)
    block = "wrap/model/block_7"
    opened = tree.normalize([block])
    assert {ROOT, "wrap/model", "wrap/model/block_*", block} <= opened
    groups, nodes = tree.visible(opened)
    assert {"wrap/model/block_7/conv", "wrap/model/block_7/relu"} <= set(nodes)
    assert "wrap/model/block_6" in groups and "wrap/model/block_7" not in groups
    assert [label for _, label in tree.breadcrumb(block)] == ["model", "wrap/model",
                                                             "block_* ×30", "block_7"]
    # The group list's names: the parent path, without the lone top group or the series.
    assert tree.path_label("wrap/model/block_7") == "block_7"
    assert tree.path_label("wrap/model") == "wrap/model"
    first = tree.first_view()
    assert tree.boxes(first) <= TOP_BOXES and "wrap/model" in first
    assert tree.first_view(depth=0) == {ROOT}
    with pytest.raises(KeyError):
        tree.normalize(["no/such/scope"])


def test_groups_of_the_same_name_are_told_apart_by_their_parent_path():
    nodes = [node("x", "Placeholder")]
    for layer in ("layer_0", "layer_1"):
        nodes += [node(f"bert/{layer}/attention/{op}", op, "x") for op in ("MatMul", "Softmax")]
        nodes += [node(f"bert/{layer}/output/{op}", op, "x") for op in ("MatMul", "Relu")]
    graph = Graph(nodes)
    tree = ScopeTree.build(graph, ConversionResult(ConversionParams(), [], [], {}, 0))
    labels = [tree.path_label(g) for g in tree.groups if g.endswith("attention")]
    assert labels == ["layer_0/attention", "layer_1/attention"]


def test_find_and_report_row_open_and_highlight_their_nodes():
    graph, result = chain_model()
    tree = ScopeTree.build(graph, result)
    focus = find(tree, "block_12/relu")
    assert focus.highlight == {"wrap/model/block_12/relu"}
    assert tree.representative("wrap/model/block_12/relu", focus.open) == \
        "wrap/model/block_12/relu"
    assert find(tree, "conv2d").highlight == {f"wrap/model/block_{i}/conv" for i in range(1, 31)}
    row = focus_on_row(tree, result, "Erfc", "Erfc is not supported")
    assert row.highlight == {"wrap/model/head/Erfc"} and "wrap/model/head" in row.open
    drawing = scope_drawing(graph, result, "full", open_groups=row.open,
                            highlight=row.highlight)
    line = next(s for s in drawing.digraph.body if '"wrap/model/head/Erfc" [' in s)
    assert HIGHLIGHT in line and "Erfc is not supported" in line  # TF-TRT's reason kept
    # A highlighted engine whose nodes sit in a collapsed group marks that group.
    shut = scope_drawing(graph, result, "full", open_groups=["wrap/model"],
                         highlight={"TRTEngineOp_000_000"})
    group = next(s for s in shut.digraph.body if "block_* ×30" in s)
    assert HIGHLIGHT in group and "1 match" in group


def test_drawing_collapsed_groups_say_what_they_hold():
    graph, result = chain_model()
    drawing = scope_drawing(graph, result, "full", open_groups=["wrap/model"])
    source = drawing.digraph.source
    assert "block_* ×30" in source and "90 nodes, 100% converted" in source
    assert "native: op not supported (1)" in source
    # The engine spans every block: in the converted view, one engine box where they were.
    converted = scope_drawing(graph, result, "converted", open_groups=["wrap/model/block_*"])
    assert "TRTEngineOp_000_000\n[90 nodes]" in converted.digraph.source
    assert converted.boxes == 4  # x, the engine, the head (collapsed), y
    engine = scope_drawing(graph, result, "engine", "TRTEngineOp_000_000", depth=9)
    assert engine.boxes == 60 and "head" not in engine.digraph.source  # its nodes only
    svg = ET.fromstring(to_svg(converted.digraph))
    assert len(svg.findall(f".//{SVG}g[@class='node']")) == converted.boxes + 1  # + legend
    with pytest.raises(WorkbenchError, match="no group"):
        scope_drawing(graph, result, open_groups=["nope"])


def test_svg_titles_name_groups_and_frames_for_clicks_and_engines_carry_overlays():
    graph, result = chain_model()
    tree = ScopeTree.build(graph, result)
    drawing = scope_drawing(graph, result, "full", open_groups=["wrap/model"], tree=tree)
    svg = ET.fromstring(to_svg(drawing.digraph))
    titles = {g.get("class"): [] for g in svg.iter(f"{SVG}g")}
    for g in svg.iter(f"{SVG}g"):
        titles[g.get("class")].append(g.findtext(f"{SVG}title"))
    # What the app gets back from a click: a collapsed group's box, an open group's frame.
    assert f"{GROUP_BOX}wrap/model/block_*" in titles["node"]
    assert f"{GROUP_BOX}wrap/model/head" in titles["node"]
    assert titles["cluster"] == [f"{FRAME}wrap/model"]
    # An engine of the engine table: its group opened, its box highlighted, its overlay drawn.
    (engine,) = result.engines
    focus = focus_on_engine(tree, engine)
    assert focus.highlight == {engine.name} and "wrap/model/block_*" in focus.open
    overlays = engine_overlays(
        {engine.name: {"built": True, "parsed": True, "kernels": [{"name": "k"}] * 12}},
        {"gpu": "NVIDIA T4", "engines": {engine.name: 0.4123}})
    assert overlays == {engine.name: "12 TensorRT kernels, ~0.412 ms on NVIDIA T4 (estimated)"}
    converted = scope_drawing(graph, result, "converted", open_groups=focus.open,
                              highlight=focus.highlight, tree=tree, overlays=overlays)
    line = next(s for s in converted.digraph.body if s.lstrip().startswith(engine.name))
    assert HIGHLIGHT in line and "12 TensorRT kernels" in line
    legend = next(s for s in converted.digraph.body if "legend" in s)
    assert "~0.412 ms on NVIDIA T4" in legend
    assert engine_overlays({engine.name: {"built": False, "parsed": True}}) == {
        engine.name: "TensorRT: build failed"}


def test_a_sparse_converted_first_view_opens_more():
    """One engine swallows a 20-block backbone; four native heads of 10 nodes stay: the full
    view's first view (25 boxes) leaves the converted view 6 boxes, so it is drawn again with
    more opened, within the budget (keras-hub's RetinaNet: 12 boxes -> 39)."""
    nodes, previous, members, unconverted = [node("x", "Placeholder")], "x", [], []
    for i in range(20):
        for layer in ("conv", "bias", "relu", "norm"):
            members.append(f"m/backbone/block_{i}/{layer}")
            nodes.append(node(members[-1], "Relu", previous))
            previous = members[-1]
    for h in range(4):
        source = previous
        for j in range(10):
            nodes.append(node(f"m/head/nms_{h}/op_{j}", "Erfc", source))
            source = nodes[-1].name
            unconverted.append(UnconvertedNode(source, "Erfc", "Erfc is not supported"))
    engine = EngineInfo("TRTEngineOp_000_000", tuple(members), {"Relu": 80}, 80, 0,
                        ("float32",), ("float32",), (None,), (None,), inputs=("x:0",),
                        outputs=(f"{previous}:0",))
    graph = Graph(nodes)
    result = ConversionResult(ConversionParams(), [engine], unconverted,
                              {"Erfc": {"Erfc is not supported": 40}}, 1)
    tree = ScopeTree.build(graph, result)
    first = tree.first_view()
    assert scope_drawing(graph, result, "converted", open_groups=first, tree=tree).boxes == 6
    drawing = scope_drawing(graph, result, "converted", tree=tree)
    assert TOP_BOXES // 3 <= drawing.boxes <= TOP_BOXES and drawing.open > first
    assert scope_drawing(graph, result, "full", tree=tree).open == first  # within budget


# --- real architectures ----------------------------------------------------------------------

_SESSIONS: dict[str, tuple[Graph, ConversionResult]] = {}


def _keras_application(name: str, directory: Path) -> Path:
    import keras

    path = directory / name
    if not path.exists():
        net = getattr(keras.applications, name)(weights=None, input_shape=(224, 224, 3))
        net.export(str(path), verbose=False)
    return path


def converted(name: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Graph,
                                                                             ConversionResult]:
    if name not in _SESSIONS:
        path = (sample_models.build(name) if name in sample_models.NAMES
                else _keras_application(name, tmp_path_factory.getbasetemp()))
        session = ConversionSession.open(path)
        _SESSIONS[name] = (session.prepared("FP32").graph, session.convert(ConversionParams()))
    return _SESSIONS[name]


@pytest.mark.slow
# tiny_bert and detector stand in for keras-hub's BERT/GPT-2 (a transformer block stack) and
# RetinaNet (a detector with NMS), which CI cannot have (docs/workbench.md has their figures).
@pytest.mark.parametrize("name", ["resnet50", "lstm", "map_fn_cnn", "tiny_bert", "detector",
                                  "EfficientNetB0", "ConvNeXtTiny"])
def test_real_models_open_within_60_boxes_and_every_group_opens(name, tmp_path_factory):
    graph, result = converted(name, tmp_path_factory)
    tree = ScopeTree.build(graph, result)
    assert len(graph.real_nodes) > 70 and len(tree.groups) > 10
    for view in ("converted", "full"):
        drawing = scope_drawing(graph, result, view, tree=tree)
        assert 3 <= drawing.boxes <= TOP_BOXES, (view, drawing.boxes)
    # Every group opens to its own nodes (weight Consts fold into their consumers).
    for gid, group in tree.groups.items():
        groups, nodes = tree.visible(tree.normalize([gid]))
        assert set(group.leaves) <= set(nodes) and set(group.children) <= set(groups)
    biggest = max((g for g in tree.groups if g), key=lambda g: tree.groups[g].nodes)
    opened = scope_drawing(graph, result, "full", open_groups=[biggest], tree=tree)
    drawn = {line.split(" [", 1)[0].strip().strip('"') for line in opened.digraph.body}
    assert set(tree.groups[biggest].leaves) <= drawn


@pytest.mark.slow
def test_lstm_report_rows_lead_to_their_nodes(tmp_path_factory):
    graph, result = converted("lstm", tmp_path_factory)
    tree = ScopeTree.build(graph, result)
    rows = [(op, reason, count) for op, reasons in result.nonconversion.items()
            for reason, count in reasons.items() if not op.startswith("_")]
    assert rows
    for op, reason, count in rows:
        focus = focus_on_row(tree, result, op, reason)
        # TF-TRT's report counts the graph's _SOURCE and _SINK NoOps, which no scope holds.
        assert len(focus.highlight) == count - (2 if op == "NoOp" else 0), (op, reason)
        assert all(tree.representative(n, focus.open) == n for n in focus.highlight)
        assert all(graph.by_name[n].op == op for n in focus.highlight)


@pytest.mark.slow
def test_cli_writes_svg_dot_and_png(tmp_path, capsys):
    model = str(sample_models.build("map_fn_cnn"))
    svg, dot, png = (tmp_path / f"g.{ext}" for ext in ("svg", "dot", "png"))
    assert cli.main(["graph", model, "-o", str(svg)]) == 0
    assert "boxes" in capsys.readouterr().out
    root = ET.parse(svg).getroot()
    assert root.tag == f"{SVG}svg" and root.findall(f".//{SVG}g[@class='cluster']")
    assert cli.main(["graph", model, "--view", "full", "--find", "while", "--target-gpu", "T4",
                     "-o", str(dot)]) == 0
    assert "highlighted" in capsys.readouterr().out
    assert "ms on Tesla T4 (estimated)" in dot.read_text()  # the legend's engine rows
    laid_out = subprocess.run(["dot", "-Tsvg", str(dot)], capture_output=True, check=True)
    assert HIGHLIGHT.encode() in laid_out.stdout and b"while loop" in laid_out.stdout
    assert cli.main(["graph", model, "--depth", "1", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert cli.main(["graph", model, "--open", "no/such", "-o", str(svg)]) == 2
    assert "no group 'no/such'" in capsys.readouterr().err
    assert cli.main(["graph", model, "-o", str(tmp_path / "g.pdf")]) == 2
    assert cli.main(["graph", model, "--list"]) == 0
    assert "[loop," in capsys.readouterr().out
