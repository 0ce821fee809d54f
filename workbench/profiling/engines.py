"""Per-layer timings of a conversion's engines on the active backend, next to native TF.

Each engine's segment is exported to ONNX, built on the backend (ONNX Runtime here, TensorRT on a
GPU machine) and profiled on the tensors it really receives for the given model inputs. The rows
share the one layer table with the TensorFlow profile, so both compare by TF node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from workbench.conversion.params import ConversionParams
from workbench.conversion.result import EngineInfo
from workbench.conversion.session import ConversionSession
from workbench.engines.backends.base import Backend, get_backend
from workbench.engines.onnx.segment_export import ExportError, export_onnx
from workbench.engines.runtime.segment_engine import build_segment_engine
from workbench.engines.segment import extract_segment
from workbench.engines.settings import BuildRequest, EngineSettings
from workbench.graph.control_flow import has_loops, loop_frames
from workbench.profiling.layers import combine
from workbench.profiling.tensorflow import (
    function_tensor_values,
    profile_tensorflow,
    tensor_values,
)


def profile_engines(session: ConversionSession, params: ConversionParams,
                    inputs: Mapping[str, np.ndarray], *, backend: Backend | None = None,
                    runs: int = 10, run: str | None = None) -> pd.DataFrame:
    """One layer table for every engine of the conversion `params` gives.

    Engines the exporter cannot handle (TF-TRT would run them natively) and engines inside a
    while loop are skipped; their names and why are listed in the table's `attrs["skipped"]`.
    Engines inside `_tftrt_convert_function` functions are profiled at their function's
    precision, on what they receive at the function's first top-level call.
    """
    backend = backend or get_backend()
    result = session.convert(params)
    prepared = session.prepared(params.precision_mode)
    label = run or f"{backend.name} {params.precision_mode}"
    settings = EngineSettings.from_params(params)
    tables, skipped = [], []
    for info in result.engines:
        _profile_engine(info, prepared, settings, backend, runs, label, tables,
                        skipped, lambda names: tensor_values(session, inputs, names,
                                                             params.precision_mode))
    for conversion in result.functions:
        function_settings = EngineSettings.from_params(conversion.params)
        for info in conversion.engines if conversion.body is not None else []:
            _profile_engine(info, conversion.body, function_settings, backend, runs, label, tables,
                            skipped, lambda names, c=conversion: function_tensor_values(
                                session, inputs, c, names, params.precision_mode))
    combined = combine(tables) if tables else pd.DataFrame()
    combined.attrs["skipped"] = skipped
    return combined


def _profile_engine(info: EngineInfo, prepared: Any, settings: EngineSettings, backend: Backend,
                    runs: int, label: str, tables: list[pd.DataFrame], skipped: list[str],
                    values: Callable[[Sequence[str]], list[np.ndarray]]) -> None:
    """Profiles one engine cut from `prepared` (a prepared graph or a function body), or
    says in `skipped` why not; `values` gives the tensors it reads."""
    graph = prepared.graph
    frames = loop_frames(graph) if has_loops(graph) else None
    loop = frames and next((frames.frame_of[n] for n in info.nodes if frames.in_loop(n)), "")
    if loop:
        # TensorFlow cannot fetch a tensor inside a loop: it has one value per iteration.
        skipped.append(f"{info.name}: inside while loop {loop} (new inputs every "
                       "iteration), not profiled on its own")
        return
    segment = extract_segment(prepared, info)
    try:
        model = export_onnx(segment)
    except ExportError as exc:
        skipped.append(f"{info.name}: {exc}")
        return
    engine_inputs = values(info.inputs)
    # INT8 calibrates on the profiled batch itself: the timings, not the ranges, matter here.
    calibration = (tuple(engine_inputs),) if settings.precision_mode == "INT8" else ()
    engine = build_segment_engine(segment, settings, BuildRequest(calibration_data=calibration),
                                  backend=backend, model=model)
    table = engine.layer_timings(engine_inputs, runs=runs, run=label)
    tables.append(table.assign(engine=info.name))


def native_and_engines(session: ConversionSession, params: ConversionParams,
                       inputs: Mapping[str, np.ndarray], *, runs: int = 10) -> pd.DataFrame:
    """The native TF profile and the engines' profile in one table (runs "native TF" and
    "<backend> <precision>")."""
    native = profile_tensorflow(session, inputs, runs=runs)
    engines = profile_engines(session, params, inputs, runs=runs)
    table = combine([native, engines])
    table.attrs["skipped"] = engines.attrs.get("skipped", [])
    return table
