"""ONNX Runtime engine profiles and the native TF profile of ResNet-50 in one table and chart."""

from __future__ import annotations

import pytest

import sample_models
from workbench.checks.inputs import random_inputs
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.profiling.engines import native_and_engines
from workbench.profiling.layers import LAYER_COLUMNS
from workbench.viz import profile_charts

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def resnet_table():
    session = ConversionSession.open(sample_models.build("resnet50"))
    table = native_and_engines(session, ConversionParams(), random_inputs(session, 1), runs=2)
    return session, table


def test_both_sources_in_one_table(resnet_table) -> None:
    session, table = resnet_table
    assert list(table.columns[: len(LAYER_COLUMNS)]) == LAYER_COLUMNS
    assert set(table["source"]) == {"tensorflow", "onnxruntime"}
    assert set(table["run"]) == {"native TF", "onnxruntime FP32"}
    assert table["device"].str.startswith("CPU").all()  # every figure says what produced it
    engine_rows = table[table["source"] == "onnxruntime"]
    assert set(engine_rows["engine"]) == {"TRTEngineOp_000_000"}
    engine_nodes = set(session.convert(ConversionParams()).engines[0].nodes)
    linked = [n for nodes in engine_rows["tf_nodes"] for n in nodes]
    assert linked and set(linked) <= engine_nodes
    assert (table["avg_ms"] > 0).all()
    for _, run in table.groupby("run"):
        assert run["pct"].sum() == pytest.approx(100, abs=0.5)


def test_native_vs_engine_chart(resnet_table) -> None:
    _, table = resnet_table
    figure = profile_charts.native_vs_engine_chart(table, "native TF", "onnxruntime FP32")
    names = {trace.name for trace in figure.data}
    assert any("native TF" in n for n in names) and any("onnxruntime" in n for n in names)
    assert sum(len(trace.x if trace.x is not None else ()) for trace in figure.data) > 10


def test_int8_engines_profile_calibrated_on_the_profiled_batch() -> None:
    from workbench.profiling.engines import profile_engines

    session = ConversionSession.open(sample_models.build("digits_cnn"))
    table = profile_engines(session, ConversionParams(precision_mode="INT8"),
                            random_inputs(session, 4), runs=2)
    assert set(table["engine"]) == {"TRTEngineOp_000_000", "TRTEngineOp_000_001"}
    assert "INT8" in set(table["precision"])
