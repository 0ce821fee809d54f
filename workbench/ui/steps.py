"""The app's background steps, each a generator of `(fraction, message)` progress returning its
result (see `tasks.py`); no widgets here: the Workbench starts them and shows what they return."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from workbench.checks.conversion_check import conversion_check_steps
from workbench.checks.export_formats import export
from workbench.checks.inputs import random_inputs
from workbench.checks.per_engine import per_engine_accuracy
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.conversion.whatif import blocking_op_types
from workbench.diagnosis import Diagnosis, doctor
from workbench.profiling.engines import native_and_engines
from workbench.ui.tasks import Progress

Step = Generator[Progress, None, Any]


def loading(model: Any, models: Mapping[str, Any], open_args: Sequence[Any], precision: str,
            params: ConversionParams, on_machine: Callable[[Diagnosis], None]) -> Step:
    """The machine checked, the model (or a name of `models`) opened, prepared and clustered:
    `(the model, its session)`."""
    yield 0.01, "Checking this machine (TensorFlow, engine backends, Graphviz)"
    on_machine(doctor(smoke=False))  # imports TensorFlow, as loading would
    if isinstance(model, str) and model in models:
        yield 0.03, f"Building or reusing {model}"
        model = resolved_model(models[model])
    yield 0.05, f"Loading {model if isinstance(model, (str, Path)) else 'model'}"
    session = ConversionSession.open(model, *open_args)
    yield 0.25, ("Preparing the graph as TF-TRT did (reading weights, freezing, Grappler, "
                 "shapes), or reading it from the cache")
    session.prepared(precision)
    yield 0.8, f"Clustering ({session.preparation_steps()})"
    session.segmentation(params)
    yield 0.95, f"Showing the results ({session.preparation_steps()})"
    return model, session


def resolved_model(choice: Any) -> Any:
    """A `models` entry: a path as it is, a function (or partial) called for the model."""
    is_function = isinstance(choice, partial) or inspect.isfunction(choice)
    return choice() if is_function else choice


def rewriting(session: ConversionSession) -> Step:
    """The session of the model with the verified rewrites applied (made once per session)."""
    yield 0.1, "Rewriting the model (freezing, the verified rewrites, Grappler on the result)"
    return session.rewritten()


def blocking_ops(session: ConversionSession, params: ConversionParams) -> Step:
    yield 0.1, "Re-segmenting once per rejected op type"
    return blocking_op_types(session, params)


def profiling(session: ConversionSession, params: ConversionParams, runs: int) -> Step:
    yield 0.1, "Profiling native TF and building and profiling each engine"
    return native_and_engines(session, params, random_inputs(session, 1), runs=runs)


def checking(session: ConversionSession, params: ConversionParams, **options: Any) -> Step:
    return (yield from conversion_check_steps(session, params, **options))


def per_engine(session: ConversionSession, params: ConversionParams, **options: Any) -> Step:
    yield 0.05, "Per-engine accuracy: building, capturing, comparing, remedies"
    return per_engine_accuracy(session, params, **options)


def exporting(session: ConversionSession, params: ConversionParams, format: str,
              output: str | Path, batch_sizes: Sequence[int]) -> Step:
    yield 0.1, f"Exporting ({format})"
    return export(session, format, output, params, batch_sizes=batch_sizes)


def tensorrt_verdicts(session: ConversionSession, params: ConversionParams) -> Step:
    """TensorRT's verdict on every engine: `(params, engine -> verdict JSON)`."""
    from workbench.checks.inputs import generated_input_sets
    from workbench.engines.inspection.tensorrt_verdict import (
        engine_verdict_steps,
        require_tensorrt,
    )
    from workbench.engines.runtime.converted_model import converted_model

    builder = require_tensorrt()
    yield 0.0, f"{builder}: exporting and building every engine"
    converted = converted_model(session, session.convert(params), params)
    sets = generated_input_sets(session, converted.input_names)
    steps = engine_verdict_steps(converted, sets)
    try:
        while True:
            fraction, engine = next(steps)
            yield fraction, f"{builder}: {engine}"
    except StopIteration as done:
        return params, {name: v.to_json() for name, v in done.value.items()}
