"""TF-TRT Workbench: TF-TRT's conversion, engines and reports on any machine.

`workbench.load(dir)` reloads a converted model saved by `TrtGraphConverterV2.save()` with its
engines; `workbench.inspect_tftrt(dir)` reads a model TF-TRT itself converted (its engines,
summary and saved plans); `workbench.doctor()` says what this machine can run;
`workbench.tune(model, grid)` runs a tuning search on Dask (`workbench.tune`);
`workbench.export(model, format, path, params)` writes a TF-TRT script, ONNX or trtexec
commands (`workbench.checks.export`). They are
imported on first use so `import workbench` stays light; it only keeps TensorFlow's
import-time chatter off stderr (`workbench.quiet`) and picks TensorFlow's CPU allocator.
"""

import os
from typing import Any

from workbench import quiet

quiet.install()
# With oneDNN on (x86 CPUs), TensorFlow's CPU tensors come from a pool that never gives memory
# back: the checkpoint read and Grappler's constants of a conversion stayed resident (figures
# in docs/memory.md). The system allocator returns it, at the same speed.
# TensorFlow reads this at its first tensor, so it applies when workbench is imported first.
os.environ.setdefault("TF_ONEDNN_USE_SYSTEM_ALLOCATOR", "1")


def __getattr__(name: str) -> Any:
    if name == "load":
        from workbench.engines.runtime.saving import load_converted

        return load_converted
    if name == "inspect_tftrt":
        from workbench.engines.backends.tftrt_graph import inspect_tftrt

        return inspect_tftrt
    if name == "tune":
        from workbench.tuning import tune

        return tune
    if name == "export":
        from workbench.checks.export import export

        return export
    if name == "doctor":
        from workbench.diagnosis import doctor

        return doctor
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
