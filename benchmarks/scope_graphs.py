"""Drawing a big model's segment graph by name scope, after conversion (issue 32's target:
under 2 s for a 3,000-node model).

The model is keras.applications architectures (weights=None) side by side on one input, an
ensemble (default EfficientNetV2L + ConvNeXtTiny: about 3,600 prepared nodes; no single
keras.applications model reaches 3,000 once Grappler folded it), saved in a temp dir and
converted once, untimed. Then, timed:
  tree     `ScopeTree.build` (scopes, series, counts)
  first    the first view (converted and full) drawn: Graphviz source and `dot` -> SVG
  find     a search that opens the scopes of its matches, drawn the same way
The figure is the slower first view (tree building included), against 2 s; the search, which
opens more (up to about 90 boxes plus the first match's groups), is printed beside it.

    nice .venv/bin/python benchmarks/scope_graphs.py [--models EfficientNetV2L,ConvNeXtTiny]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import record

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
TARGET_S = 2.0
MIN_NODES = 3000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="EfficientNetV2L,ConvNeXtTiny",
                        help="keras.applications names, comma-separated (default: "
                             "EfficientNetV2L,ConvNeXtTiny)")
    parser.add_argument("--find", default="Sigmoid", help="the search to time")
    args = parser.parse_args()
    names = args.models.split(",")
    graph, result = _converted(names)
    model = "+".join(names)
    nodes = len(graph.real_nodes)
    print(f"{model}: {nodes} prepared nodes, {len(result.engines)} engines")

    from workbench.viz.graphs import to_svg
    from workbench.viz.hierarchy import ScopeTree
    from workbench.viz.scope_graphs import scope_drawing

    start = time.perf_counter()
    tree = ScopeTree.build(graph, result)
    tree_s = time.perf_counter() - start
    timings: dict[str, tuple[float, int]] = {}
    for label, view, search in (("converted", "converted", ""), ("full", "full", ""),
                                (f"full, find {args.find!r}", "full", args.find)):
        start = time.perf_counter()
        drawing = scope_drawing(graph, result, view, search=search, tree=tree)
        to_svg(drawing.digraph)
        timings[label] = (time.perf_counter() - start + tree_s, drawing.boxes)
    for label, (seconds, boxes) in timings.items():
        print(f"  {label}: {seconds:.2f} s ({boxes} boxes)")
    worst = max(timings["converted"][0], timings["full"][0])
    met = worst <= TARGET_S and nodes >= MIN_NODES
    figures = [record.figure(
        f"{model} ({nodes} nodes): segment graph by scope, first view, tree + drawing + dot -> "
        "SVG (slower of converted, full)", f"{worst:.2f} s (tree {tree_s * 1000:.0f} ms)",
        f"<= {TARGET_S:g} s for >= {MIN_NODES} nodes", met)]
    figures += [record.figure(f"{model}: {label}", f"{seconds:.2f} s, {boxes} boxes")
                for label, (seconds, boxes) in timings.items()]
    record.write("scope_graphs", figures)


def _converted(names: list[str]):  # noqa: ANN202 - (Graph, ConversionResult)
    import keras

    from workbench.conversion.params import ConversionParams
    from workbench.conversion.session import ConversionSession

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "ensemble"
        images = keras.Input((224, 224, 3))
        outputs = [getattr(keras.applications, name)(weights=None, input_shape=(224, 224, 3))(
            images) for name in names]
        joined = outputs[0] if len(outputs) == 1 else keras.layers.Average()(outputs)
        keras.Model(images, joined, name="ensemble").export(str(path), verbose=False)
        session = ConversionSession.open(path)
        return session.prepared("FP32").graph, session.convert(ConversionParams())


if __name__ == "__main__":
    main()
