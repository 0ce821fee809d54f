"""Reading the per-layer timing table: layer names -> TF nodes, text and JSON, aligned runs.

The table itself (its columns, `layer_table`, `combine`) is defined in
`workbench.engines.layer_table`, below the backends that fill it; it is re-exported here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

import pandas as pd

from workbench.engines.layer_table import (
    LAYER_COLUMNS,
    SOURCES,
    combine,
    layer_table,
    normalise_precision,
)

__all__ = ["LAYER_COLUMNS", "SOURCES", "NodeLinker", "align_runs", "combine", "layer_scopes",
           "layer_table", "normalise_precision", "shared_node_groups", "split_layer_name",
           "table_document", "table_text", "tf_name_of"]

# --- Layer names -> TF nodes ---------------------------------------------------------------
# TensorRT names a fused layer after its parts ("a + b"), wraps point-wise fusions in PWN(...),
# myelin regions in {ForeignNode[first...last]}, and names format copies after the layer they
# feed. The ONNX exporters add their own prefixes and suffixes around the TF node names.
_REFORMAT = re.compile(r"^Reformatting CopyNode for (?:Input|Output) Tensor \d+ to ")
_FOREIGN = re.compile(r"\{ForeignNode\[(.*?)\]\}")
_PART_SEPARATORS = re.compile(r" \+ |, |\.\.\.")
_EXPORTER_PREFIXES = ("transpose_before_", "transpose_after_", "unsqueeze_node_after_",
                      "copied_squeeze_after_", "squeeze_after_", "reshape_after_",
                      "reshape_before_")
_TENSOR_PORT = re.compile(r":\d+$")
_TF2ONNX_SUFFIX = re.compile(r"__\d+$")  # tf2onnx's helper nodes: "<tf node>__6"
_KERAS_SUFFIX = re.compile(r"_\d+$")  # Keras 3 uniquifies layer scopes: "conv1_conv_1"
_CALL_SCOPE = "StatefulPartitionedCall/"


def split_layer_name(name: str) -> list[str]:
    """The parts of a (fused) TensorRT layer name, in order, without TensorRT's wrappers."""
    text = _REFORMAT.sub("", name.strip())
    text = _FOREIGN.sub(r"\1", text).replace("PWN(", "")
    parts: list[str] = []
    for piece in _PART_SEPARATORS.split(text):
        piece = _drop_unbalanced_closers(piece.strip())
        if piece and piece not in parts:
            parts.append(piece)
    return parts


def _drop_unbalanced_closers(piece: str) -> str:
    # PWN(a, PWN(b + c)) leaves stray ")" after the wrappers are removed.
    while piece.endswith(")") and piece.count(")") > piece.count("("):
        piece = piece[:-1].rstrip()
    return piece


def tf_name_of(part: str) -> str | None:
    """The TF node a layer-name part names, or None when it is TensorRT's or an exporter's own."""
    text = _TENSOR_PORT.sub("", part)
    for prefix in _EXPORTER_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
    text = _TF2ONNX_SUFFIX.sub("", text)
    if "/" not in text or text.startswith("(Unnamed"):
        return None
    return text


class NodeLinker:
    """Finds the TF nodes a layer name refers to, in a graph when one is given.

    Names are compared exactly, then without the `StatefulPartitionedCall/` scope and Keras'
    `_N` suffixes (case-insensitive), then by scope plus op type (Keras 3 calls a Conv2D node
    `convolution`, Keras 2 and tf2onnx `Conv2D`).
    """

    def __init__(self, nodes: Iterable[tuple[str, str]] | None = None):
        self._exact: dict[str, str] | None = None
        if nodes is None:
            return
        self._exact, self._loose, self._by_op = {}, {}, {}
        for name, op in nodes:
            self._exact[name] = name
            key = _loose_name(name)
            self._loose.setdefault(key, name)
            scope = key.rpartition("/")[0]
            self._by_op.setdefault((scope, op.lower()), []).append(name)

    def tf_nodes(self, layer_name: str) -> list[str]:
        found: list[str] = []
        for part in split_layer_name(layer_name):
            name = self.tf_node(part)
            if name and name not in found:
                found.append(name)
        return found

    def tf_node(self, part: str) -> str | None:
        """The TF node one part of a layer name (or one ONNX node name) refers to."""
        candidate = tf_name_of(part)
        if candidate is None or self._exact is None:
            return candidate
        if candidate in self._exact:
            return candidate
        key = _loose_name(candidate)
        if key in self._loose:
            return self._loose[key]
        scope, _, leaf = key.rpartition("/")
        same_op = self._by_op.get((scope, leaf), [])
        return same_op[0] if len(same_op) == 1 else None


def _loose_name(name: str) -> str:
    while name.startswith(_CALL_SCOPE):
        name = name[len(_CALL_SCOPE):]
    return "/".join(_KERAS_SUFFIX.sub("", part) for part in name.split("/")).lower()


# --- Output --------------------------------------------------------------------------------

def table_text(table: pd.DataFrame) -> str:
    """The table the way trtexec's --dumpProfile prints it: times first, the layer name last."""
    lines = []
    for (run, source, device), rows in table.groupby(["run", "source", "device"], sort=False):
        lines.append(f"=== {run}: {len(rows)} layers, {source} on {device} ===")
        lines.append(f"{'Avg.(ms)':>9} {'Median(ms)':>10} {'Time(%)':>7}  {'Precision':<9} "
                     f"{'Type':<18} Layer")
        for row in rows.itertuples(index=False):
            lines.append(f"{row.avg_ms:9.4f} {row.median_ms:10.4f} {row.pct:7.2f}  "
                         f"{row.precision or '-':<9} {row.layer_type or '-':<18} {row.layer}")
        lines.append(f"{rows['avg_ms'].sum():9.4f} {'':>10} {rows['pct'].sum():7.2f}  Total")
    return "\n".join(lines)


def table_document(table: pd.DataFrame) -> dict:
    """The table as one JSON-ready document: the rows plus the reader's metadata (attrs)."""
    rows = json.loads(table.to_json(orient="records"))
    return {"layers": rows, **{k: v for k, v in table.attrs.items() if v is not None}}


# --- Aligning runs -------------------------------------------------------------------------
# Quantization toolkits rename layers ("quant_conv1_conv") and add quantizer scopes; format
# copies repeat the names of the layer they feed, so they align by exact name only.
_QUANT_PREFIX = re.compile(r"(^|/)quant_")
_QUANTIZER_SCOPES = re.compile(r"/(lastvaluequant|allvaluesquantize|movingavgquantize)/")
_COPY_PREFIX = "Reformatting CopyNode"


def layer_scopes(tf_nodes: Iterable[str]) -> set[str]:
    """The Keras layers (TF name scopes) of a layer's TF nodes, in one spelling for all runs."""
    scopes = set()
    for name in tf_nodes:
        loose = _QUANT_PREFIX.sub(r"\1", _loose_name(name))
        quantizer = _QUANTIZER_SCOPES.search(loose)
        # A quantizer's scope sits inside its layer's; any other name ends in its op.
        scope = loose[: quantizer.start()] if quantizer else loose.rpartition("/")[0]
        if scope:
            scopes.add(scope)
    return scopes


def align_runs(table: pd.DataFrame, runs: Iterable[str] | None = None) -> pd.DataFrame:
    """Layers of several runs side by side: one row per aligned layer, `<run>` columns in ms.

    A layer joins the row with its exact name, else the row whose layers share the most TF name
    scopes with it (same kind of layer: a convolution never aligns with a shuffle); otherwise it
    gets a row of its own. `layer` names the row after its first run; `<run>:layer` columns keep
    each run's own layer name.
    """
    order = list(runs) if runs is not None else list(dict.fromkeys(table["run"]))
    groups: list[dict] = []
    for run in order:
        last = -1
        for row in table[table["run"] == run].itertuples(index=False):
            index = _find_group(groups, run, row)
            if index is None:
                index = last + 1
                groups.insert(index, {"layer": row.layer, "scopes": set(), "family": None})
            group = groups[index]
            group[run], group[f"{run}:layer"] = float(row.avg_ms), row.layer
            group["scopes"] |= layer_scopes(row.tf_nodes)
            group["family"] = group["family"] or _family(row.layer_type)
            last = index
    columns = ["layer", *order, *(f"{r}:layer" for r in order)]
    return pd.DataFrame([{c: g.get(c) for c in columns} for g in groups], columns=columns)


def _find_group(groups: list[dict], run: str, row: object) -> int | None:
    layer, scopes = row.layer, layer_scopes(row.tf_nodes)  # type: ignore[attr-defined]
    family = _family(row.layer_type)  # type: ignore[attr-defined]
    best, best_overlap = None, 0
    for index, group in enumerate(groups):
        if run in group:
            continue
        if any(group.get(k) == layer for k in group if k.endswith(":layer")):
            return index
        if layer.startswith(_COPY_PREFIX) or (family and group["family"]
                                              and family != group["family"]):
            continue
        overlap = len(scopes & group["scopes"])
        if overlap > best_overlap:
            best, best_overlap = index, overlap
    return best


def _family(layer_type: object) -> str | None:
    if not isinstance(layer_type, str) or not layer_type:
        return None
    for family in ("Convolution", "Pooling", "SoftMax", "Reformat", "Shuffle"):
        if family.lower() in layer_type.lower():
            return family
    return layer_type


def shared_node_groups(table: pd.DataFrame, first: str, second: str) -> pd.DataFrame:
    """Time of the same TF nodes in two runs (any two sources): one row per group of layers.

    Layers of either run that share a TF node (compared loosely, as `NodeLinker` does) fall in
    one group, so three native TF ops fused into one engine layer make one row. Rows are only
    kept when both runs have time there. Columns: `label`, `first_ms`, `second_ms`, the layer
    names of each side, and `tf_nodes`.
    """
    rows = [r for r in table.itertuples(index=False) if r.run in (first, second) and r.tf_nodes]
    parent = list(range(len(rows)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, row in enumerate(rows):
        for node in row.tf_nodes:
            key = _loose_name(node)
            if key in owner:
                parent[root(i)] = root(owner[key])
            owner.setdefault(key, i)
    groups: dict[int, list] = {}
    for i, row in enumerate(rows):
        groups.setdefault(root(i), []).append(row)
    out = [_group_row(members, first, second) for members in groups.values()]
    columns = ["label", "first_ms", "second_ms", "first_layers", "second_layers", "tf_nodes"]
    return pd.DataFrame([r for r in out if r["first_ms"] and r["second_ms"]], columns=columns)


def _group_row(members: list, first: str, second: str) -> dict:
    side = {run: [m for m in members if m.run == run] for run in (first, second)}
    nodes = list(dict.fromkeys(n for m in members for n in m.tf_nodes))
    label = side[second][0].layer if side[second] else members[0].layer
    return {"label": label,
            "first_ms": sum(m.avg_ms for m in side[first]),
            "second_ms": sum(m.avg_ms for m in side[second]),
            "first_layers": [m.layer for m in side[first]],
            "second_layers": [m.layer for m in side[second]],
            "tf_nodes": nodes}
