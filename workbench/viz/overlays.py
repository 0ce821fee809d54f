"""What the segment graph can say about each engine beyond its nodes: TensorRT's kernels (its
verdict, once asked for) and the time estimated on a GPU (`--target-gpu`). One short line per
engine, drawn in the engine's box and its legend row by the app, the HTML report and
`workbench graph`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.words import counted


def engine_overlays(tensorrt: Mapping[str, Mapping[str, Any]] | None = None,
                    estimate: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Engine name -> its line: `12 TensorRT kernels` (or why TensorRT refused it) from
    TensorRT's verdicts (`convert --tensorrt`'s objects), `~0.41 ms on T4 (estimated)` from
    `profiling.estimate.graph_estimate.graph_estimate`'s document."""
    parts: dict[str, list[str]] = {}
    for name, verdict in (tensorrt or {}).items():
        parts.setdefault(name, []).append(_verdict_text(verdict))
    if estimate:
        gpu = estimate.get("gpu", "the GPU")
        for name, ms in estimate.get("engines", {}).items():
            if ms is not None:
                parts.setdefault(name, []).append(f"~{ms:.3g} ms on {gpu} (estimated)")
    return {name: ", ".join(texts) for name, texts in parts.items()}


def _verdict_text(verdict: Mapping[str, Any]) -> str:
    if verdict.get("built"):
        kernels = len(verdict.get("kernels") or ())
        return counted(kernels, "TensorRT kernel") if kernels \
            else "TensorRT builds it"
    return "TensorRT: build failed" if verdict.get("parsed") else "TensorRT: parse failed"
