"""Hand-made conversion results and minimum_segment_size sweeps, for the tests that read them
(recommendations, sweep charts)."""

from __future__ import annotations

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, EngineInfo


def engine(index: int, size: int) -> EngineInfo:
    return EngineInfo(
        name=f"TRTEngineOp_000_{index:03d}",
        nodes=tuple(f"e{index}_n{k}" for k in range(size)),
        native_ops={"Relu": size},
        native_node_count=size,
        effective_size=size,
        input_dtypes=("float32",),
        output_dtypes=("float32",),
        input_shapes=((-1, 4),),
        output_shapes=((-1, 4),),
    )


def result(threshold: int, sizes: list[int], total: int = 40) -> ConversionResult:
    engines = [engine(i, s) for i, s in enumerate(sizes)]
    converted = sum(sizes)
    return ConversionResult(
        params=ConversionParams(minimum_segment_size=threshold),
        engines=engines,
        unconverted=[],
        nonconversion={},
        not_converted_top_level=total - converted,
    )


def tftrt_sweep(
    segment_sizes: list[int], thresholds: range, max_engines: int = 20
) -> list[ConversionResult]:
    """What TF-TRT keeps per threshold: segments at least that large, the largest
    `max_engines` of them, in their original order (spec §2.9, §2.10)."""
    sweep = []
    for t in thresholds:
        eligible = [i for i, s in enumerate(segment_sizes) if s >= t]
        eligible.sort(key=lambda i: -segment_sizes[i])
        kept = sorted(eligible[:max_engines])
        sweep.append(result(t, [segment_sizes[i] for i in kept]))
    return sweep
