"""One engine as TensorRT built it, drawn in TREx's manner: each kernel a box listing the TF
nodes it holds, each tensor between kernels an edge labelled with its shape and datatype.

The kernels come from TensorRT-RTX's build log (`TensorRTVerdict.anatomy`) or from a GPU's
engine inspector JSON (`profiling.trtexec.read_trtexec_kernels`); JSON kernels (`convert --json
--tensorrt`, the app's verdicts) are taken as they are. Shape calls and stream events, which
move no tensor, are left out and counted in the title; the TF nodes in no kernel are two notes:
the shape nodes (computed from tensor shapes) and those TensorRT removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

import graphviz

from workbench.engines.inspection.tensorrt_kernels import EngineAnatomy, Kernel, KernelTensor
from workbench.errors import WorkbenchError
from workbench.graph.nodes import Graph
from workbench.viz.graphs import EDGE_ATTR, GRAPH_ATTR, NODE_ATTR, _last
from workbench.words import counted

NO_VERDICT = ("No TensorRT verdict on this engine yet: press \"TensorRT verdicts\" in the "
              "Summary tab to build the engines with TensorRT-RTX, then come back here.")
NODES_LISTED = 8  # TF nodes written in a kernel's box; the rest are counted
# Fill by what a kernel does (TensorRT-RTX's and the inspector's layer types).
TYPE_COLORS = (
    (("correlation", "convolution", "deconvolution"), "#aec7e8"),
    (("gemm", "matrixmultiply", "fullyconnected", "fc"), "#c5b0d5"),
    (("runtime_fusion", "myelin"), "#98df8a"),
    (("pool",), "#ffbb78"),
    (("kgen", "pointwise", "elementwise", "activation", "scale"), "#dbdb8d"),
    (("reformat", "shuffle", "noop", "slice", "padding", "copy"), "#e0e0e0"),
)
OTHER_COLOR = "#f7f7f7"
_IO_STYLE = {"fillcolor": "#ffffff", "style": "filled", "fontsize": "8"}


def kernel_color(kernel_type: str) -> str:
    """The fill of a kernel of `kernel_type` (the first family its name contains)."""
    lowered = kernel_type.lower()
    for families, color in TYPE_COLORS:
        if any(f in lowered for f in families):
            return color
    return OTHER_COLOR


def kernel_graph(anatomy: EngineAnatomy | Iterable[Kernel | Mapping[str, Any]],
                 graph: Graph | None = None, engine: str = "",
                 removed: Sequence[str] = (), shape_nodes: Sequence[str] = ()
                 ) -> graphviz.Digraph:
    """The engine's kernels in execution order with the tensors between them; `graph` (the
    prepared graph) gives each listed TF node its op type. Kernels given as a list (objects or
    JSON) come with the `removed` TF nodes and the `shape_nodes`, which an anatomy holds
    itself."""
    folded: Mapping[str, Any] = {}
    if isinstance(anatomy, EngineAnatomy):
        kernels, engine = list(anatomy.kernels), engine or anatomy.engine
        removed, folded = anatomy.removed, anatomy.folded
        shape_nodes = anatomy.shape_nodes
    else:
        kernels = [k if isinstance(k, Kernel) else Kernel.from_record(k) for k in anatomy]
    drawn = [k for k in kernels if k.inputs or k.outputs]
    dot = graphviz.Digraph(f"kernels_{engine}", graph_attr=GRAPH_ATTR,
                           node_attr={**NODE_ATTR, "shape": "plain"}, edge_attr=EDGE_ATTR)
    held = len({n for k in drawn for n in k.nodes})
    hidden = len(kernels) - len(drawn)
    title = (f"{engine}: {counted(len(drawn), 'kernel')} holding {counted(held, 'TF node')}"
             + (f" (not drawn: {hidden} without tensors: shape calls and stream "
                "synchronisations)" if hidden else ""))
    # Two lines: on one, the note is wider than the app's drawing at its first zoom.
    dot.attr(label=title.replace(" (not drawn", "\\n(not drawn"), labelloc="t", fontsize="11",
             tooltip=title)
    producer: dict[str, str] = {}
    for index, kernel in enumerate(drawn):
        node_id = f"k{index}"
        dot.node(node_id, _kernel_label(kernel, graph, folded), tooltip=_tooltip(kernel))
        for tensor in kernel.outputs:
            producer[tensor.name] = node_id
    consumed: set[str] = set()
    for index, kernel in enumerate(drawn):
        for tensor in kernel.inputs:
            consumed.add(tensor.name)
            source = producer.get(tensor.name)
            if source is None:  # an engine input (ids by number: dot reads `a:0` as a port)
                source = producer[tensor.name] = f"in{len(producer)}"
                dot.node(source, f"input\n{_last(tensor.name)}", shape="invhouse",
                         tooltip=tensor.name, **_IO_STYLE)
            dot.edge(source, f"k{index}", label=_tensor_label(tensor), fontsize="7",
                     tooltip=f"{tensor.name}: {tensor.format}")
    for index, kernel in enumerate(drawn):
        for tensor in kernel.outputs:
            if tensor.name not in consumed:  # an engine output
                sink = f"out{len(consumed)}"
                consumed.add(tensor.name)
                dot.node(sink, f"output\n{_last(tensor.name)}", shape="house",
                         tooltip=tensor.name, **_IO_STYLE)
                dot.edge(f"k{index}", sink, label=_tensor_label(tensor), fontsize="7")
    if shape_nodes:
        dot.node("shape_nodes", f"shape nodes, computed from tensor shapes: "
                 f"{counted(len(shape_nodes), 'TF node')}", shape="note", style="filled",
                 fillcolor="#e8e2f2", fontsize="9", tooltip=_node_list(shape_nodes, graph))
    if removed:
        dot.node("removed", f"removed by TensorRT: {counted(len(removed), 'TF node')}",
                 shape="note", style="filled", fillcolor="#fbe3a6", fontsize="9",
                 tooltip=_node_list(removed, graph))
    return dot


def _node_list(names: Sequence[str], graph: Graph | None) -> str:
    """One line per TF node: its op type (where the graph knows it) and name."""
    return "\n".join(f"{graph.by_name[n].op}  {n}" if graph is not None and n in graph.by_name
                     else n for n in names)


def verdict_kernel_graph(tensorrt: Mapping[str, Mapping[str, Any]] | None, engine: str,
                         graph: Graph | None = None) -> graphviz.Digraph:
    """`kernel_graph` of one engine's TensorRT verdict (its JSON, as the app and
    `convert --json --tensorrt` keep it); a WorkbenchError saying what to do without one."""
    verdict = (tensorrt or {}).get(engine)
    if verdict is None:
        raise WorkbenchError(NO_VERDICT)
    if not verdict.get("built"):
        raise WorkbenchError(f"TensorRT did not build {engine}: {verdict.get('error')}")
    return kernel_graph(verdict.get("kernels") or [], graph, engine,
                        verdict.get("removed_nodes") or (), verdict.get("shape_nodes") or ())


def _kernel_label(kernel: Kernel, graph: Graph | None, folded: Mapping[str, Any]) -> str:
    """An HTML table: the kernel's type and name, then the TF nodes it holds."""
    color = kernel_color(kernel.type)
    rows = [f'<tr><td bgcolor="{color}" align="left"><b>{escape(kernel.type)}</b> '
            f'<font point-size="7">{escape(_short(kernel.name, 40))}</font></td></tr>']
    for name in kernel.nodes[:NODES_LISTED]:
        # The op type from the graph, else the name's last part ("Conv2D", "Relu").
        op = graph.by_name[name].op if graph is not None and name in graph.by_name \
            else name.rpartition("/")[2]
        mark = " (folded in)" if name in folded else ""
        text = f"{op}  {_last(name, op)}" if _last(name, op) != op else op
        rows.append(f'<tr><td align="left"><font point-size="8">{escape(text + mark)}'
                    "</font></td></tr>")
    if len(kernel.nodes) > NODES_LISTED:
        rows.append(f'<tr><td align="left"><font point-size="8">+ '
                    f"{len(kernel.nodes) - NODES_LISTED} more</font></td></tr>")
    table = ('<table border="1" cellborder="0" cellspacing="0" cellpadding="2" '
             f'bgcolor="#ffffff" color="#6a6a6a">{"".join(rows)}</table>')
    return f"<{table}>"


def _tooltip(kernel: Kernel) -> str:
    return "\n".join([f"{kernel.type}: {kernel.name}", *kernel.nodes])


def _tensor_label(tensor: KernelTensor) -> str:
    dims = "x".join("?" if d < 0 else str(d) for d in tensor.shape)
    return f"{dims} {tensor.dtype or ''}".strip()


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
