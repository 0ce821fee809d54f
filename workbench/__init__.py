"""TF-TRT Workbench: TF-TRT's conversion, engines and reports on any machine.

`workbench.load(dir)` reloads a converted model saved by `TrtGraphConverterV2.save()` with its
engines; `workbench.inspect_tftrt(dir)` reads a model TF-TRT itself converted (its engines,
summary and saved plans). Both are imported on first use so `import workbench` stays light.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "load":
        from workbench.engines.saving import load_converted

        return load_converted
    if name == "inspect_tftrt":
        from workbench.engines.tftrt_graph import inspect_tftrt

        return inspect_tftrt
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
