"""TensorRT via ONNX next to TF-TRT: what does a model lose or gain by leaving TF-TRT?

The whole model goes through tf2onnx (`checks.onnx_model`) to TensorRT-RTX's ONNX parser
(`engines.tensorrt_rtx_onnx`): nodes in subgraphs it supports are taken, nodes it rejects carry
its reason, and a plan is built when everything parses. Each ONNX node maps back to the
TensorFlow node it came from, so both verdicts sit on the nodes TF-TRT's segmentation used.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from workbench.checks.onnx_model import export_whole_model, write_model_files
from workbench.conversion.params import ConversionParams
from workbench.engines.backends import tensorrt_rtx_onnx
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.conversion.result import ConversionResult
    from workbench.conversion.session import ConversionSession
    from workbench.graph.nodes import Graph

TAKEN, REJECTED, UNSUPPORTED_SUBGRAPH, NO_ONNX_NODE, INPUT = (
    "taken", "rejected", "in an unsupported subgraph", "no ONNX node", "model input")
# TF nodes tf2onnx turns into no ONNX node of their own: weights become initializers.
_VANISHING_OPS = frozenset({"Const", "Identity", "IdentityN", "NoOp", "Snapshot",
                            "StopGradient"})


@dataclass
class SideBySide:
    """TF-TRT's segmentation and TensorRT's parser verdict on the same model."""

    result: ConversionResult
    nodes: pd.DataFrame  # per TF node: node, op, tftrt_engine, tftrt_reason, tensorrt, reason
    tensorrt_subgraphs: int = 0  # subgraphs TensorRT supports
    rejections: list[tensorrt_rtx_onnx.Rejection] = field(default_factory=list)
    rejected_at: list[str | None] = field(default_factory=list)  # each rejection's TF node
    plan_bytes: int | None = None  # the built plan's size when the whole model parsed
    note: str = ""  # why there is no TensorRT verdict or plan

    @property
    def tensorrt_status(self) -> dict[str, str]:
        """TF node -> TensorRT's verdict (TAKEN, REJECTED, ...), for the graph's colouring."""
        return dict(zip(self.nodes["node"], self.nodes["tensorrt"], strict=True))

    def table(self) -> pd.DataFrame:
        """One row per path: engines, share of the model's nodes, what blocks the rest."""
        total = len(self.nodes)
        tftrt_blocks = Counter(self.nodes.loc[self.nodes["tftrt_engine"] == "", "op"])
        tensorrt_blocks = Counter(f"{r.op}" + (f" in {at}" if at else "") + f" ({r.reason})"
                                  for r, at in zip(self.rejections, self.rejected_at,
                                                   strict=True))
        taken = int((self.nodes["tensorrt"] == TAKEN).sum())
        rows = [
            {"path": "TF-TRT (segments in TensorFlow)", "engines": len(self.result.engines),
             "% of nodes": round(self.result.percent_converted, 2),
             "blocked by": _top(tftrt_blocks, "Placeholder", *_VANISHING_OPS) or "nothing"},
            {"path": "TensorRT via ONNX (whole model)", "engines": self.tensorrt_subgraphs,
             "% of nodes": round(100 * taken / total, 2) if total and not self.note else None,
             "blocked by": self.note or _top(tensorrt_blocks) or
             (f"nothing: built a {self.plan_bytes}-byte plan" if self.plan_bytes else
              "nothing (no plan built)")},
        ]
        return pd.DataFrame(rows)


def side_by_side(session: ConversionSession, params: ConversionParams | None = None,
                 *, build: bool = True) -> SideBySide:
    """TF-TRT's conversion with `params` and TensorRT-RTX's verdict on the whole model's ONNX
    (built into a plan when it all parses and `build`). Without tf2onnx or TensorRT-RTX, or
    for a model tf2onnx cannot export, the TensorRT side says why in `note`."""
    params = params or ConversionParams()
    result = session.convert(params)
    nodes = _tftrt_nodes(result, session.prepared(params.precision_mode).graph)
    available, detail = tensorrt_rtx_onnx.available()
    if not available:
        return SideBySide(result, _no_verdict(nodes), note=detail)
    try:
        export = export_whole_model(session)
    except WorkbenchError as exc:
        return SideBySide(result, _no_verdict(nodes), note=str(exc))
    if export.external_weights:  # past protobuf's 2 GB: the parser reads the weights' file
        with tempfile.TemporaryDirectory(prefix="workbench-onnx-") as directory:
            path = Path(directory) / "model.onnx"
            write_model_files(export, path)
            capability = tensorrt_rtx_onnx.capability(path.read_bytes(), str(path))
        build, onnx_bytes = False, b""  # a plan past 2 GB: build it with trtexec
    else:
        onnx_bytes = export.model.SerializeToString()
        capability = tensorrt_rtx_onnx.capability(onnx_bytes)
    graph = session.prepared(params.precision_mode).graph
    tf_nodes = export.tf_nodes({node.name for node in graph})
    by_tf = _fused_into_consumers(_onnx_verdicts(tf_nodes, capability), graph)
    verdicts = [_verdict(row.node, row.op, export.input_names, by_tf)
                for row in nodes.itertuples()]
    nodes["tensorrt"] = [status for status, _ in verdicts]
    nodes["tensorrt_reason"] = [reason for _, reason in verdicts]
    view = SideBySide(result, nodes, sum(ok for _, ok in capability.subgraphs),
                      capability.rejections,
                      rejected_at=[tf_nodes[r.index] if 0 <= r.index < len(tf_nodes) else None
                                   for r in capability.rejections])
    if build and capability.supported:
        from workbench.checks.export_formats import build_shape_sets, engine_profiles

        shapes = build_shape_sets(session)
        view.plan_bytes = len(tensorrt_rtx_onnx.build_plan(
            onnx_bytes, engine_profiles(params, shapes), export.input_names,
            params.precision_mode))
    return view


def _tftrt_nodes(result: ConversionResult, graph: Graph) -> pd.DataFrame:
    rows = [{"node": n, "op": graph[n].op, "tftrt_engine": e.name, "tftrt_reason": ""}
            for e in result.engines for n in e.nodes]
    rows += [{"node": u.name, "op": u.op, "tftrt_engine": "", "tftrt_reason": u.reason}
             for u in result.unconverted]
    frame = pd.DataFrame(rows, columns=["node", "op", "tftrt_engine", "tftrt_reason"])
    return frame.drop_duplicates("node").reset_index(drop=True)


def _no_verdict(nodes: pd.DataFrame) -> pd.DataFrame:
    return nodes.assign(tensorrt="", tensorrt_reason="")


def _verdict(node: str, op: str, inputs: list[str],
             by_tf: dict[str, list[tuple[str, str]]]) -> tuple[str, str]:
    """TensorRT's verdict on one TF node, from the verdicts on the ONNX nodes it became."""
    verdicts = by_tf.get(node)
    if not verdicts:
        if node in inputs or op == "Placeholder":
            return INPUT, ""
        return (TAKEN, "folded into the ONNX model's weights") if op in _VANISHING_OPS \
            else (NO_ONNX_NODE, "tf2onnx made no node of it")
    rejected = [reason for status, reason in verdicts if status == REJECTED]
    if rejected:
        return REJECTED, rejected[0]
    if all(status == TAKEN for status, _ in verdicts):
        return TAKEN, ""
    return UNSUPPORTED_SUBGRAPH, next(reason for status, reason in verdicts if reason)


def _fused_into_consumers(by_tf: dict[str, list[tuple[str, str]]], graph: Graph,
                          depth: int = 3) -> dict[str, list[tuple[str, str]]]:
    """tf2onnx fuses some nodes into the ONNX node named after a consumer (Conv2D into its
    BiasAdd, Einsum into a MatMul): such a node shares the verdict of its nearest consumer
    that has ONNX nodes, up to `depth` edges down."""
    consumers: dict[str, list[str]] = {}
    for node in graph:
        for ref in node.inputs:
            consumers.setdefault(ref.node, []).append(node.name)
    found = dict(by_tf)
    for node in graph:
        if node.name in by_tf or node.op in _VANISHING_OPS or node.op == "Placeholder":
            continue
        frontier = consumers.get(node.name, [])
        for _ in range(depth):
            hit = next((c for c in frontier if c in by_tf), None)
            if hit:
                found[node.name] = by_tf[hit]
                break
            frontier = [c for f in frontier for c in consumers.get(f, [])]
    return found


def _onnx_verdicts(tf_nodes: list[str | None], capability: tensorrt_rtx_onnx.Capability
                   ) -> dict[str, list[tuple[str, str]]]:
    """TF node -> (status, reason) of every ONNX node made from it."""
    status = {}
    for nodes, supported in capability.subgraphs:
        error = next((r for r in capability.rejections if r.index in nodes),
                     capability.rejections[0] if capability.rejections else None)
        why = "" if supported else "TensorRT did not take this subgraph" + (
            f" (the parser's error: {error.node}, {error.op})" if error else "")
        for i in nodes:
            status[i] = (TAKEN, "") if supported else (UNSUPPORTED_SUBGRAPH, why)
    for rejection in capability.rejections:
        status[rejection.index] = (REJECTED, f"{rejection.node} ({rejection.op}): "
                                             f"{rejection.reason}")
    by_tf: dict[str, list[tuple[str, str]]] = {}
    for i, tf_node in enumerate(tf_nodes):
        if tf_node is not None:
            by_tf.setdefault(tf_node, []).append(status.get(i, (TAKEN, "")))
    return by_tf


def _top(counts: Counter, *skip: str, limit: int = 4) -> str:
    items = [(k, n) for k, n in counts.most_common() if k not in skip]
    text = ", ".join(f"{k} x{n}" for k, n in items[:limit])
    return text + (f", +{len(items) - limit} more" if len(items) > limit else "")
