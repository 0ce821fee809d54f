"""TF-TRT Workbench: TF-TRT's conversion, engines and reports on any machine.

`workbench.load(dir)` reloads a converted model saved by `TrtGraphConverterV2.save()` with its
engines; `workbench.inspect_tftrt(dir)` reads a model TF-TRT itself converted (its engines,
summary and saved plans) and `workbench.strip_engines(dir, out)` writes it loadable without
TF-TRT; `workbench.register_tftrt_ops()` registers TF-TRT's ops (compiled on first use), so
plain `tf.saved_model.load` loads TF-TRT's models and the workbench's; `workbench.doctor()`
says what this machine can run;
`workbench.tune(model, grid)` runs a tuning search on Dask (`workbench.tuning.tune`, with a
progress bar in a notebook);
`workbench.export(model, format, path, params)` writes a TF-TRT script, ONNX or trtexec
commands (`workbench.checks.export_formats`); `workbench.quiet_notebook()` keeps logs off a
notebook's page. The checks, readers, drawings and charts the lessons use are here too
(`_LAZY_EXPORTS`), each documented on the API page, so a notebook never imports the modules
behind them. They are imported on first use so `import workbench` stays light.

Importing the package does one thing, and must do it here: it puts an import finder on
`sys.meta_path` (`workbench.quiet`) that waits for TensorFlow's first import, whoever makes it.
A notebook's `import workbench` then `import tensorflow as tf` shows none of TensorFlow's
import-time chatter, and neither do the many routes by which the package itself first imports
TensorFlow (its lazy handle, `tensorflow.core` protos, TensorFlow-private modules). At that
moment the finder also sets TensorFlow's environment (`lazy.before_tensorflow_import`: the
system allocator for CPU tensors, docs/memory.md), then removes itself. Nothing else changes:
no environment variable is set until TensorFlow is about to start. Once TensorFlow is imported,
the workbench's TRTEngineOp is registered if its library is compiled (see below).
"""

import importlib
from typing import Any

from workbench import lazy, quiet


def _register_engine_op() -> None:
    from workbench.engines.runtime.native_op.trt_engine_op import register_if_compiled

    register_if_compiled()


quiet.install()
# Saved converted models hold TF-TRT's TRTEngineOp nodes: registered as soon as TensorFlow is
# imported (when the workbench compiled its op library before), plain `tf.saved_model.load`
# loads them as it loaded TF-TRT's.
lazy.after_tensorflow_import(_register_engine_op)

# The package's functions, imported on first use: name -> (module, its name there).
_LAZY_EXPORTS = {
    "load": ("workbench.engines.runtime.saving", "load_converted"),
    "inspect_tftrt": ("workbench.engines.tftrt.saved_model", "inspect_tftrt"),
    "strip_engines": ("workbench.engines.tftrt.strip", "strip_engines"),
    "register_tftrt_ops": ("workbench.engines.runtime.native_op.trt_engine_op",
                           "register_engine_op"),
    "tune": ("workbench.ui.progress_bars", "tune"),  # with a bar in a notebook
    "export": ("workbench.checks.export_formats", "export"),
    "doctor": ("workbench.diagnosis", "doctor"),
    "quiet_notebook": ("workbench.quiet", "quiet_notebook"),
    "WorkbenchError": ("workbench.errors", "WorkbenchError"),
    # What the lessons use beyond the converter, each documented on the API page (docs/api.md,
    # tests/test_public_api.py): checks, profiles, the trtexec readers, drawings and charts.
    "check_conversion": ("workbench.checks.conversion_check", "check_conversion"),
    "per_engine_accuracy": ("workbench.checks.per_engine", "per_engine_accuracy"),
    "side_by_side": ("workbench.checks.tensorrt_view", "side_by_side"),
    "optimization_profiles": ("workbench.engines.profiles", "optimization_profiles"),
    "profile_table": ("workbench.engines.profiles", "profile_table"),
    "fixtures_dir": ("workbench.profiling.trtexec", "fixtures_dir"),
    "read_trtexec_dir": ("workbench.profiling.trtexec", "read_trtexec_dir"),
    "read_trtexec_kernels": ("workbench.profiling.trtexec", "read_trtexec_kernels"),
    "combine": ("workbench.engines.layer_table", "combine"),
    "align_runs": ("workbench.profiling.layers", "align_runs"),
    "shared_node_groups": ("workbench.profiling.layers", "shared_node_groups"),
    "expected_fusions": ("workbench.profiling.fusions", "expected_fusions"),
    "match_fusions": ("workbench.profiling.fusions", "match_fusions"),
    "profile_tensorflow": ("workbench.profiling.tensorflow", "profile_tensorflow"),
    "random_inputs": ("workbench.checks.inputs", "random_inputs"),
    "rewrites": ("workbench.conversion.rewrites", "select"),
    "save_rewritten": ("workbench.conversion.rewrites.model", "save_rewritten"),
    "draw": ("workbench.viz.graphs", "draw"),
    "inline_svg": ("workbench.viz.graphs", "inline_svg"),
    "to_svg": ("workbench.viz.graphs", "to_svg"),
    "side_by_side_graph": ("workbench.viz.graphs", "side_by_side_graph"),
    "kernel_graph": ("workbench.viz.kernel_graph", "kernel_graph"),
    "sweep_chart": ("workbench.viz.charts", "sweep_chart"),
    "engine_sizes_chart": ("workbench.viz.charts", "engine_sizes_chart"),
    "latency_chart": ("workbench.viz.charts", "latency_chart"),
    "per_engine_chart": ("workbench.viz.charts", "per_engine_chart"),
    "precision_chart": ("workbench.viz.profile_charts", "precision_chart"),
    "layer_latency_chart": ("workbench.viz.profile_charts", "layer_latency_chart"),
    "layer_type_chart": ("workbench.viz.profile_charts", "layer_type_chart"),
    "latency_sunburst": ("workbench.viz.profile_charts", "latency_sunburst"),
    "compare_runs_chart": ("workbench.viz.profile_charts", "compare_runs_chart"),
    "native_vs_engine_chart": ("workbench.viz.profile_charts", "native_vs_engine_chart"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY_EXPORTS:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    module, attribute = _LAZY_EXPORTS[name]
    return getattr(importlib.import_module(module), attribute)
