"""Engines built ahead of calls: TF-TRT's build() for the shapes an `input_fn` yields, INT8
calibration data, and the engines a first call would otherwise build at run time.

Only shapes count (as on a GPU): each engine's input shapes are inferred from the model's, and
data runs through the model natively only for engines whose input shapes depend on values.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from workbench.engines.profiles import optimization_profiles
from workbench.engines.runtime.engine_op import Collected, EngineOp
from workbench.engines.runtime.input_sets import InputSets
from workbench.engines.runtime.runtime_graph import RuntimeGraph
from workbench.engines.settings import EngineSettings
from workbench.errors import WorkbenchError, first_line
from workbench.lazy import tf

logger = logging.getLogger("workbench.engines")


class ModelToBuild(Protocol):
    """What building needs of a `converted_model.ConvertedModel`."""

    settings: EngineSettings

    @property
    def graph(self) -> RuntimeGraph: ...

    @property
    def ops(self) -> dict[str, EngineOp]: ...

    @property
    def input_names(self) -> list[str]: ...

    def engine_settings(self, engine: str) -> EngineSettings: ...

    def run_natively(self, sets: InputSets, shapes: bool) -> dict[str, Collected]: ...


def build_engines(model: ModelToBuild, sets: InputSets) -> None:
    """TF-TRT's build(): every engine op's engines for the input sets' shapes."""
    shapes = engine_shapes(model, sets)
    for name, op in model.ops.items():
        settings = model.engine_settings(name)  # a function's engines have their own
        if settings.use_dynamic_shape:
            _build_with_profiles(op, settings, shapes[name])
        else:
            _build_per_shape_set(op, shapes[name])


def _build_with_profiles(op: EngineOp, settings: EngineSettings, shapes: list[Any]) -> None:
    """One engine holding every profile the strategy makes of the shapes."""
    if shapes:
        strategy = settings.dynamic_shape_profile_strategy or "Range"
        op.profiles = tuple(optimization_profiles(shapes, strategy))
        op.build()


def _build_per_shape_set(op: EngineOp, shapes: list[Any]) -> None:
    """Implicit batch: each distinct shape set serves or builds an engine (up to
    maximum_cached_engines per op, the LRU keeping the most recent)."""
    for engine_shapes in dict.fromkeys(shapes):
        op.build(engine_shapes)


def engine_shapes(model: ModelToBuild, sets: InputSets) -> dict[str, list[Any]]:
    """engine -> its input shapes for each input set (inferred; from a native run of the
    set when they depend on values, with a clear error when that run fails)."""
    inferred: dict[Any, dict[str, Any]] = {}
    found: dict[str, list[Any]] = {name: [] for name in model.ops}
    for index, (inputs, set_shapes) in enumerate(zip(sets.sets, sets.shapes, strict=True)):
        if set_shapes not in inferred:
            inferred[set_shapes] = model.graph.engine_input_shapes(set_shapes)
        shapes = dict(inferred[set_shapes])
        _fill_value_dependent(model, shapes, inputs, index)
        for name, value in shapes.items():
            if value is not None:
                found[name].append(value)
    return found


def _fill_value_dependent(model: ModelToBuild, shapes: dict[str, Any], inputs: list[Any],
                          index: int) -> None:
    """The shapes inference left unknown, from a native run of input set `index`."""
    from workbench.engines.runtime.engine_shapes import data_run_error

    unknown = [name for name, value in shapes.items() if value is None]
    if not unknown:
        return
    try:
        collected = model.run_natively(InputSets([inputs]), shapes=True)
    except tf.errors.OpError as exc:
        prepared = model.graph.prepared_graph_def
        ops = {n.name: n.op for n in prepared.node} if prepared is not None else {}
        raise data_run_error(exc, unknown, index, ops, model.input_names) from None
    for name in unknown:
        shapes[name] = (collected[name][0] or [None])[0]


def calibrate(model: ModelToBuild, sets: InputSets) -> None:
    """INT8: each op's input batches from running `sets` natively become the calibration data
    of the engines built afterwards (one shape only, TF-TRT's rule)."""
    distinct = list(dict.fromkeys(sets.shapes))
    if len(distinct) > 1:
        raise WorkbenchError(
            "calibration data must have a single shape (TF-TRT's rule); "
            f"calibration_input_fn yielded {len(distinct)}: "
            + ", ".join(str([list(s) for s in shapes]) for shapes in distinct[:4]))
    collected = model.run_natively(sets, shapes=False)
    for name, op in model.ops.items():
        op.calibration_data = tuple(collected[name][1])


def build_for_first_call(model: ModelToBuild, tensors: list[Any]) -> None:
    """Implicit batch: the engines the first call would build at run time, built before the
    graph is put together, so that it holds no native fallback branch (with every weight
    again) for TensorFlow to optimize. Engines whose input shapes need a data run are left
    to the call."""
    ops = model.ops
    if not _builds_at_first_call(model):
        return
    try:
        found = model.graph.engine_input_shapes(InputSets([tensors]).shapes[0])
    except Exception as error:  # the call itself builds (and reports) as TF-TRT's kernel did
        logger.debug("engine shapes left to the first call: %s", first_line(error))
        return
    for name, shapes in found.items():
        if shapes is not None and name in ops and ops[name].settings.use_implicit_batch:
            ops[name].build(shapes)


def _builds_at_first_call(model: ModelToBuild) -> bool:
    """Implicit batch, a graph to infer shapes in, and every op still to build at run time."""
    return (not model.settings.use_dynamic_shape and model.graph.prepared_graph_def is not None
            and all(op.settings.allow_build_at_runtime and not len(op.cache)
                    for op in model.ops.values()))
