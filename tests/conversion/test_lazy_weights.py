"""Float Consts reach the op rules undecoded (issue 12): same reports, no large decode."""

from __future__ import annotations

import numpy as np
import pytest

import sample_models
from workbench.conversion import operands
from workbench.conversion.conversion_report import ConversionReport
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession

pytestmark = pytest.mark.slow
LARGE_BYTES = 4096  # bigger than any constant a rule reads values from (axes, sizes, ...)
PARAMS = (
    ConversionParams(),
    ConversionParams(precision_mode="FP16", use_dynamic_shape=True, minimum_segment_size=1),
)


def _reports(session: ConversionSession) -> list[str]:
    return [ConversionReport(session.convert(p)).to_json() for p in PARAMS]


@pytest.mark.parametrize("name", sample_models.NAMES)
def test_reports_equal_the_decoding_path(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    session = ConversionSession.open(sample_models.build(name), cache=False)
    lazy = _reports(session)
    monkeypatch.setattr(operands, "_lazy_float_weights", lambda const: None)
    session._segmentations.clear()  # cluster again on the same graph, every Const decoded
    assert lazy == _reports(session)


@pytest.mark.parametrize("name", ["resnet50", "tiny_bert", "mobilenet_v2"])
def test_clustering_decodes_no_large_const(name: str) -> None:
    session = ConversionSession.open(sample_models.build(name), cache=False)
    for params in PARAMS:
        session.convert(params)
    graph = session.prepared().graph
    consts = [n for n in graph.real_nodes if n.op == "Const"]
    large = [n for n in consts if n.raw_attrs["value"].tensor.ByteSize() > LARGE_BYTES]
    assert len(large) > 10  # the check below has something to look at
    decoded = [n.name for n in large if "value" in n._decoded]
    assert decoded == []


def test_weights_values_are_decoded_when_a_rule_reads_them() -> None:
    session = ConversionSession.open(sample_models.build("digits_cnn"), cache=False)
    graph = session.prepared().graph
    const = next(n for n in graph.real_nodes
                 if n.op == "Const" and n.attr("dtype") == "float" and n.raw_attrs[
                     "value"].tensor.ByteSize() > LARGE_BYTES)
    operand = operands.const_weights(const)
    assert operand.data is None and "value" not in const._decoded
    assert operand.value.shape == operand.shape and operand.value.dtype == np.float32
