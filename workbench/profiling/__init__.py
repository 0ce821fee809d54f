"""Per-layer profiler timings from every source in one table (`layers`), and their readers."""

from workbench.profiling.layers import LAYER_COLUMNS, SOURCES, combine, layer_table

__all__ = ["LAYER_COLUMNS", "SOURCES", "combine", "layer_table"]
