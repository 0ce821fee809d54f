"""The converted model's outputs checked against the signature's, on every call.

A converted graph that drops a branch or mixes up a layout can return a tensor of the wrong
shape without TensorFlow noticing (a cond whose engine never ran gave a float32 `[0]`). Each
output must have the signature's dtype, rank and every dimension the signature knows; else
`WrongOutputError` names the output, what produced it and the preparation target. The check
reads shapes only: a few comparisons per output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError
from workbench.graph.nodes import TensorSpec
from workbench.lazy import tf


class WrongOutputError(WorkbenchError):
    """A converted model's output does not match the signature: a workbench bug, never a
    result to use."""


@dataclass(frozen=True)
class OutputSpec:
    """One signature output: its name, TensorFlow dtype name (`float32`, `string`) and shape
    (None: unknown rank; negative dimensions: unknown)."""

    name: str
    dtype: str  # "" when unknown
    shape: tuple[int, ...] | None

    @staticmethod
    def of(name: str, spec: TensorSpec | None) -> OutputSpec:
        """From a prepared graph's static properties (TF's short dtype name: `float`)."""
        if spec is None:
            return OutputSpec(name, "", None)
        return OutputSpec(name, tf.as_dtype(spec.dtype).name, spec.shape)

    def mismatch(self, value: Any) -> str:
        """What is wrong with `value` (a tensor) for this output, "" when nothing is."""
        if self.dtype and value.dtype.name != self.dtype:
            return f"dtype {value.dtype.name}, the signature's is {self.dtype}"
        shape = tuple(value.shape)
        if self.shape is None:
            return ""
        if len(shape) != len(self.shape) or any(
                want >= 0 and got != want for got, want in zip(shape, self.shape, strict=True)):
            return f"shape {list(shape)}, the signature's is {_shape_text(self.shape)}"
        return ""


def _shape_text(shape: Sequence[int]) -> str:
    return "[" + ", ".join("None" if d < 0 else str(d) for d in shape) + "]"


def check_outputs(values: Sequence[Any], specs: Sequence[OutputSpec], prepared_for: str,
                  producer: Callable[[int], str]) -> None:
    """Raises `WrongOutputError` for the first output of `values` that does not match its
    spec; `producer(i)` names what made output i (asked only then)."""
    for index, (value, spec) in enumerate(zip(values, specs, strict=False)):
        problem = spec.mismatch(value)
        if problem:
            where = f" (graph prepared for {prepared_for})" if prepared_for else ""
            raise WrongOutputError(
                f"the converted model's output {spec.name!r}, made by {producer(index)}, has "
                f"{problem}{where}. The converted graph is wrong: no result was returned. "
                "Report it with this message; until then convert with prepare_for='cpu' or "
                "a denylist for that op.")


def producer_of(graph_def: Any, tensor: str, engines: Sequence[str]) -> str:
    """What made `tensor` in a converted GraphDef: the engine, function call or node at the
    end of its Identity chain."""
    nodes = {node.name: node for node in graph_def.node}
    name = tensor.split(":")[0].lstrip("^")
    seen = set()
    while name in nodes and nodes[name].op == "Identity" and nodes[name].input \
            and name not in seen:
        seen.add(name)
        name = nodes[name].input[0].split(":")[0].lstrip("^")
    node = nodes.get(name)
    if name in engines:
        return f"engine {name}"
    if node is None:
        return f"node {name}"
    if node.op in ("PartitionedCall", "StatefulPartitionedCall"):
        return f"function {node.attr['f'].func.name} (node {name})"
    return f"node {name} ({node.op})"
