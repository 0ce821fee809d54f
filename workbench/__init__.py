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
commands (`workbench.checks.export`). They are
imported on first use so `import workbench` stays light.

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
    "export": ("workbench.checks.export", "export"),
    "doctor": ("workbench.diagnosis", "doctor"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY_EXPORTS:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}")
    module, attribute = _LAZY_EXPORTS[name]
    return getattr(importlib.import_module(module), attribute)
