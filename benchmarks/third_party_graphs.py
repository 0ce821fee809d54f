"""Segment graphs by name scope on third-party SavedModels (keras-hub, Model Garden; issue 32's
"every model opens in at most about 60 boxes, each group opens to its nodes").

For every SavedModel directory under --models (what `benchmarks/third_party.py` exports),
converted with the default parameters: the first view's boxes (converted and full views, as
`workbench graph` draws them), the groups, whether every group opens to its own nodes and
groups, and the drawing's time (tree + Graphviz source + `dot` -> SVG, after conversion).
With --out, each first view is written there as NAME.svg (converted view), to look at.

    nice .venv/bin/python benchmarks/third_party_graphs.py --models /work/thirdparty/models
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import record

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
TOP_BOXES = 60


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", required=True, help="a directory of SavedModel directories")
    parser.add_argument("--out", default=None, help="write each converted first view here")
    args = parser.parse_args()
    figures = []
    for path in sorted(p for p in Path(args.models).iterdir() if (p / "saved_model.pb").exists()):
        try:
            row = _measure(path, Path(args.out) if args.out else None)
        except Exception as exc:  # noqa: BLE001 - a model that cannot convert is a row, too
            print(f"{path.name}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            continue
        print(f"{path.name}: {row['nodes']} nodes, {row['engines']} engines, {row['groups']} "
              f"groups; first view {row['converted']} boxes converted, {row['full']} full; every "
              f"group opens: {row['opens']}; drawn in {row['seconds']:.2f} s")
        met = max(row["converted"], row["full"]) <= TOP_BOXES and row["opens"]
        figures.append(record.figure(
            f"{path.name} ({row['nodes']} nodes, {row['engines']} engines): first view, boxes "
            "(converted / full); every group opens to its nodes",
            f"{row['converted']} / {row['full']}; {'yes' if row['opens'] else 'NO'}; drawn in "
            f"{row['seconds']:.2f} s", f"<= {TOP_BOXES} boxes", met))
    record.write("third_party_graphs", figures)


def _measure(path: Path, out: Path | None) -> dict:
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.session import ConversionSession
    from workbench.viz.graphs import to_svg
    from workbench.viz.hierarchy import ScopeTree
    from workbench.viz.scope_graphs import scope_drawing

    session = ConversionSession.open(path)
    result = session.convert(ConversionParams())
    graph = session.prepared("FP32").graph
    start = time.perf_counter()
    tree = ScopeTree.build(graph, result)
    converted = scope_drawing(graph, result, "converted", tree=tree)
    svg = to_svg(converted.digraph)
    seconds = time.perf_counter() - start
    full = scope_drawing(graph, result, "full", tree=tree)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{path.name}.svg").write_text(svg)
    return {"nodes": len(graph.real_nodes), "engines": len(result.engines),
            "groups": len(tree.groups) - 1, "converted": converted.boxes, "full": full.boxes,
            "opens": all(_opens(tree, gid) for gid in tree.groups), "seconds": seconds}


def _opens(tree, gid: str) -> bool:  # noqa: ANN001 - a ScopeTree
    """Opening `gid` shows its own nodes and its child groups."""
    groups, nodes = tree.visible(tree.normalize([gid]))
    group = tree.groups[gid]
    return set(group.leaves) <= set(nodes) and set(group.children) <= set(groups)


if __name__ == "__main__":
    main()
