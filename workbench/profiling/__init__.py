"""Per-layer profiler timings from every source in one table (`layers`), and their readers."""

from workbench.profiling.layers import LAYER_COLUMNS, SOURCES, combine, layer_table
from workbench.profiling.trtexec import read_trtexec, read_trtexec_dir, trtexec_summary

__all__ = ["LAYER_COLUMNS", "SOURCES", "combine", "layer_table", "read_trtexec",
           "read_trtexec_dir", "trtexec_summary"]
