"""`TrtGraphConverterV2.summary()` as TF-TRT 2.17 prints it (docs/tftrt-behaviour.md#summary).

`summary_lines` returns the strings summary() hands to `print_fn`, one per call and in order.
Some of them start or end with "\\n", exactly as TF-TRT passes them; the bare `print_fn()` call
before each op histogram is the empty string here.
"""

from __future__ import annotations

from typing import Any

from workbench.conversion.conversion_report import engine_device, engines_by_name, shape_list
from workbench.conversion.result import ConversionResult, EngineInfo
from workbench.errors import ConversionParamsError

MIN_LINE_LENGTH = 160
# (header, width as a fraction of the line length); cells end at the cumulative sums.
SUMMARY_COLUMNS: tuple[tuple[str, float], ...] = (
    ("TRTEngineOP Name", .20),
    ("Device", .09),
    ("# Nodes", .05),
    ("# Inputs", .09),
    ("# Outputs", .09),
    ("Input DTypes", .12),
    ("Output Dtypes", .12),
    ("Input Shapes", .12),
    ("Output Shapes", .12),
)
TRUNCATION_MARK = " ..."
ENGINE_SEPARATOR = f"\n{'-' * 40}\n"


def column_ends(line_length: int) -> list[int]:
    """End position of each cell: cumulative sums of int(line_length * width)."""
    ends, position = [], 0
    for _header, width in SUMMARY_COLUMNS:
        position += int(line_length * width)
        ends.append(position)
    return ends


def format_row(fields: list[Any], ends: list[int]) -> str:
    """One table row: cells padded to their end, a space before each, overflow cut with ` ...`."""
    line = ""
    for index, (field, end) in enumerate(zip(fields, ends, strict=True)):
        if index:
            line += " "
        line = f"{line}{field}".ljust(end)
        if len(line) > end:
            line = line[: end - len(TRUNCATION_MARK)] + TRUNCATION_MARK
    return line


def _engine_fields(engine: EngineInfo) -> list[Any]:
    # TF-TRT prints Python lists; an unknown-rank shape has no dims there, hence [].
    def shapes(items):
        return [shape_list(s) or [] for s in items]

    return [
        engine.name,
        engine_device(engine),
        engine.native_node_count,
        len(engine.input_dtypes),
        len(engine.output_dtypes),
        list(engine.input_dtypes),
        list(engine.output_dtypes),
        shapes(engine.input_shapes),
        shapes(engine.output_shapes),
    ]


def _footer(result: ConversionResult, line_length: int) -> list[str]:
    converted, total = result.converted_nodes, result.total_nodes
    # TF-TRT divides by zero on an empty graph; we print 0.00% instead.
    ratio = converted / total * 100 if total else 0.0
    return [
        f"\n{'=' * line_length}",
        f"[*] Total number of TensorRT engines: {len(result.engines)}",
        f"[*] % of OPs Converted: {ratio:.2f}% [{converted}/{total}]\n",
    ]


def summary_lines(
    result: ConversionResult, line_length: int = 160, detailed: bool = True
) -> list[str]:
    """The strings TrtGraphConverterV2.summary(line_length, detailed) passes to print_fn."""
    if line_length < MIN_LINE_LENGTH:
        raise ConversionParamsError(
            f"Invalid `line_length` value has been received: {line_length}. "
            f"Minimum: {MIN_LINE_LENGTH}."
        )
    ends = column_ends(line_length)
    lines = [format_row([h for h, _ in SUMMARY_COLUMNS], ends), "=" * line_length]
    engines = engines_by_name(result)
    for engine in engines:
        if len(engines) != 1:
            lines.append(ENGINE_SEPARATOR)
        lines.append(format_row(_engine_fields(engine), ends))
        if detailed:
            lines.append("")
            lines.extend(f"\t- {op}: {n}x" for op, n in sorted(engine.native_ops.items()))
    return lines + _footer(result, line_length)
