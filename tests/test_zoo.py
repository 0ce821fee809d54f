"""The model zoo's fast subset: each model through convert, first run, comparison with native
TensorFlow, save and reload, with the benchmark's own code (`benchmarks/zoo.py`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from sample_models.zoo import FEATURES

pytestmark = pytest.mark.slow


def _benchmark():
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "zoo.py"
    if str(path.parent) not in sys.path:  # its `record` module sits beside it
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("zoo_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# Engines at TF-TRT's defaults: the LSTM's loop body merges nothing (TF-TRT's cycle check
# follows the back edges), map_fn has one engine inside its loop and one after it.
ENGINES = {"lstm": 0, "map_fn": 2, "strings": 1, "xla_function": 3}


@pytest.mark.parametrize("name", ENGINES)
def test_zoo_model_round_trip(name):
    row = _benchmark().run_model(FEATURES[name])
    assert row.passed, row.error
    assert row.engines == ENGINES[name] and row.nodes > row.engines
    assert row.max_error <= 1e-4


def test_function_model_keeps_its_xla_functions():
    """The function-heavy model really keeps non-inlined functions between engines (what
    made ConvNeXt's first call fail)."""
    from workbench import trt_convert as trt

    converter = trt.TrtGraphConverterV2(input_model=FEATURES["xla_function"].make())
    converter.convert()
    calls = [n for n in converter.session.prepared().graph_def.node
             if n.op == "StatefulPartitionedCall"]
    assert len(calls) == 2
    unconverted = converter.report.unconverted
    assert set(unconverted[unconverted.op == "StatefulPartitionedCall"].name) == {
        n.name for n in calls}
