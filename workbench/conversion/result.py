"""The outcome of one conversion, as plain data: engines, non-converted nodes and counts.

Everything the reports, the CLI's JSON, the widgets and the charts show is read from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.conversion.params import ConversionParams, RecordedParams

Shape = tuple[int, ...] | None


@dataclass(frozen=True)
class EngineInfo:
    """One TRTEngineOp as TF-TRT would create it (docs/tftrt-behaviour.md#engine-ops, #summary).

    `nodes` are the segment's node names (sorted). `native_ops` is the op histogram of the
    engine's `<name>_native_segment` function: the segment nodes plus the outside Consts copied
    in, so `native_node_count` is what `summary()` prints as `# Nodes` (the JSON calls it
    `ops`; in code `.ops` means engine ops, as in `ConvertedModel.ops`).
    dtypes use numpy-style names (`float32`); unknown dims are -1.
    """

    name: str
    nodes: tuple[str, ...]
    native_ops: dict[str, int]
    native_node_count: int
    effective_size: int
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    input_shapes: tuple[Shape, ...]
    output_shapes: tuple[Shape, ...]
    inputs: tuple[str, ...] = ()  # outside tensors feeding the engine, "node:port", port order
    outputs: tuple[str, ...] = ()  # segment tensors leaving the engine, "node:port", port order
    device: str = "/device:GPU:0"


@dataclass(frozen=True)
class UnconvertedNode:
    """A node outside every engine and why.

    `in_tftrt_report` is True for nodes TF-TRT's non-conversion report counts (rejected by the
    candidate test, docs/tftrt-behaviour.md#nonconversion-report); False for candidates left out
    later (segment too small, cycle,
    max engines, ...), which TF-TRT never reported and the workbench explains in its own words.
    """

    name: str
    op: str
    reason: str
    in_tftrt_report: bool = True


class LazyList(Sequence):
    """A list built on first use: a sweep over 64 thresholds needs counts, not node lists."""

    def __init__(self, build: Callable[[], Sequence[Any]]):
        self._build: Callable[[], Sequence[Any]] | None = build
        self._items: list[Any] = []

    def _resolved(self) -> list[Any]:
        if self._build is not None:
            self._items, self._build = list(self._build()), None
        return self._items

    def __getitem__(self, index: Any) -> Any:
        return self._resolved()[index]

    def __len__(self) -> int:
        return len(self._resolved())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._resolved())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return "LazyList(...)" if self._build is not None else repr(self._items)


@dataclass
class ConversionResult:
    """Engines, unconverted nodes and the summary counts for one set of parameters: what the
    segmenter cuts for a threshold (`Segmentation.result`), with the parameters, the model and
    the TensorFlow that made it once the session has it.

    `params` is the `ConversionParams` the segmenter read the partition at, as the caller built
    them (the session's, each sweep threshold replaced in), or, for a model TF-TRT converted
    (`inspect_tftrt`), the `RecordedParams` its engine ops record."""

    params: ConversionParams | RecordedParams
    engines: list[EngineInfo]
    unconverted: Sequence[UnconvertedNode]
    # TF-TRT's non-conversion report: op type -> reason -> count (includes _SOURCE/_SINK NoOps).
    nonconversion: dict[str, dict[str, int]]
    # Top-level nodes left in the converted graph that are not TRTEngineOps
    # (docs/tftrt-behaviour.md#summary).
    not_converted_top_level: int
    model: str = ""
    signature_key: str = "serving_default"
    # The TensorFlow whose Grappler prepared the graph: node counts differ between releases.
    tensorflow_version: str = ""
    # The device Grappler prepared the graph for (graph/gpu.py), e.g. "NVIDIA T4 (sm_75)".
    prepared_for: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # Functions converted because they carry `_tftrt_convert_function` (FunctionConversion):
    # TF-TRT's summary() never counted their engines, so neither do the counts below.
    functions: list[Any] = field(default_factory=list)

    @property
    def minimum_segment_size(self) -> int | None:
        """The threshold of this result (None for a TF-TRT converted model, which does not
        record it)."""
        return self.params.minimum_segment_size

    @property
    def converted_nodes(self) -> int:
        return sum(e.native_node_count for e in self.engines)

    @property
    def total_nodes(self) -> int:
        return self.converted_nodes + self.not_converted_top_level

    @property
    def percent_converted(self) -> float:
        total = self.total_nodes
        return round(100.0 * self.converted_nodes / total, 2) if total else 0.0
