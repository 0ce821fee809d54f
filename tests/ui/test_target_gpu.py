"""The app's target GPU: the picker, the Charts tab's estimated sweep, the Profiling tab's
estimated engines (and a trtexec profile's layers measured beside estimated), and the Tune tab
ranking its trials by the estimate. Driven from Python on map_fn_cnn (four engines at
minimum_segment_size 1, one from 4)."""

from __future__ import annotations

import pytest
from conftest import fixture_path

import sample_models
from workbench.errors import WorkbenchError
from workbench.tuning import TrialRecord, expand_grid
from workbench.ui import Workbench

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Workbench:
    return Workbench(sample_models.build("map_fn_cnn"),
                     store=tmp_path_factory.mktemp("target") / "runs", background=False)


def test_no_gpu_means_cpu_measurements_only(app: Workbench) -> None:
    app.target_gpu.set(None)
    assert app.target_gpu.gpu is None and "none: CPU measurements only" in str(
        app.target_gpu.picker.options[0])
    assert not any("estimate" in name for name in app.figures)
    assert "Pick a target GPU" in app.charts_tab.estimate.note.value
    assert app.target_gpu.per_gpu.layout.display == "none"  # no batch or measurement to give
    with pytest.raises(WorkbenchError, match="Unknown GPU 'GTX 480': give one of T4"):
        app.target_gpu.set("GTX 480")


def test_one_measured_latency_calibrates_every_estimate_on_that_gpu(app: Workbench) -> None:
    app.set_params({"minimum_segment_size": 1})
    app.target_gpu.set("T4", batch_size=1)
    assert app.target_gpu.per_gpu.layout.display == "flex"
    before = dict(zip(app.figures["estimate sweep"].data[0].x,
                      app.figures["estimate sweep"].data[0].y, strict=True))
    app.target_gpu.measured.value = round(3 * before[1], 4)  # the conversion shown: mss 1
    sweep = app.figures["estimate sweep"]
    after = dict(zip(sweep.data[0].x, sweep.data[0].y, strict=True))
    assert after[1] == pytest.approx(3 * before[1], rel=1e-3)
    assert after[4] == pytest.approx(3 * before[4], rel=1e-3)  # every other threshold too
    assert "calibrated on FP32, minimum_segment_size 1, batch 1" in \
        sweep.layout.meta["estimate_label"]
    assert "calibrated on" in app.profile_tab.estimate.note.value
    assert sweep.data[0].error_y.array is not None  # the range, drawn
    app.target_gpu.measured.value = 0.0
    assert app.target_gpu.calibration is None
    app.target_gpu.set(None)


def test_picking_a_gpu_draws_the_estimated_sweep_and_engines(app: Workbench) -> None:
    app.set_params({"minimum_segment_size": 1})
    app.target_gpu.set("NVIDIA T4", batch_size=8)
    sweep = app.figures["estimate sweep"]
    assert "Estimated latency on Tesla T4" in sweep.layout.title.text
    assert "batch 8" in sweep.layout.title.text
    assert sweep.layout.meta["estimate_label"].startswith("estimated for Tesla T4; ")
    assert "out of sample" in app.profile_tab.estimate.note.value
    converted = dict(zip(sweep.data[0].x, sweep.data[0].y, strict=True))
    assert converted[1] > converted[4]  # four engines estimated slower than one
    assert "more, smaller engines are estimated slower" in app.charts_tab.estimate.note.value
    engines = app.figures["estimate per engine"]
    assert "Engine times estimated for Tesla T4" in engines.layout.title.text
    assert len(engines.data[0].y) == 4 + 1  # four engines and the TF ops between them
    assert "converted ms" in app.profile_tab.estimate.table.value
    # The threshold slider reuses the sweep's estimate; the engines follow the threshold.
    def cached() -> dict:
        return {session: dict(tables)
                for session, tables in app.charts_tab.estimate._tables.items()}

    before = cached()
    assert list(before) == [app.target_gpu.session_of()]  # per session, not per id()
    app.set_params({"minimum_segment_size": 4})
    assert cached() == before
    assert len(app.figures["estimate per engine"].data[0].y) == 1 + 1
    app.target_gpu.set(None)
    assert not any("estimate" in name for name in app.figures)


def test_profiling_tab_puts_a_trtexec_profile_beside_the_estimate(app: Workbench) -> None:
    folder = fixture_path("torch-resnet18-a100-fp16")
    app.target_gpu.set(None)  # none picked: estimated for the GPU the profile ran on
    table = app.profile_tab.estimate.compare(str(folder / "engine.profile.json"),
                                             str(folder / "engine.graph.json"))
    assert table.attrs["gpu"] == "NVIDIA A100 80GB PCIe"
    assert table.attrs["measured_on"] == "trtexec on NVIDIA A100 80GB PCIe"
    assert table["measured_ms"].notna().all() and (table["estimated_ms"] >= 0).all()
    figure = app.profile_tab.estimate.figures["estimate beside trtexec"]
    assert [trace.name for trace in figure.data] == [
        "estimated for NVIDIA A100 80GB PCIe", "measured (trtexec on NVIDIA A100 80GB PCIe)"]
    app.profile_tab.estimate.profile.value = "no/such.json"
    app.profile_tab.estimate._compare_clicked()
    assert "wb-error" in app.profile_tab.estimate.compare_note.value


def test_tune_tab_ranks_finished_trials_by_the_picked_gpu(app: Workbench) -> None:
    def trial(threshold: int, cpu_ms: float) -> TrialRecord:
        params = expand_grid({"minimum_segment_size": [threshold]})[0].params
        return TrialRecord(f"mss{threshold}", params, "ok", percent_converted=20.0,
                           engines=4 if threshold == 1 else 1, max_abs_error=1e-7,
                           latency_ms={1: {"mean": cpu_ms, "p50": cpu_ms, "p99": cpu_ms}},
                           speedup=1.0, backend="onnxruntime", device="CPU")

    tab = app.tune_tab
    tab.records = [trial(1, 1.0), trial(4, 1.5)]  # the CPU timed four engines fastest
    app.target_gpu.set("T4")  # ranked again at once, no trial run again
    assert tab.result.recommended["trial_id"] == "mss4"
    assert "estimated for Tesla T4" in tab.recommendation.value
    assert "4 engines are estimated slower" in tab.recommendation.value
    assert "estimated for Tesla T4" in tab.figures["pareto"].layout.xaxis.title.text
    assert "estimated ms on Tesla T4" in tab.table.value
    app.target_gpu.set(None)  # back to what this CPU measured
    assert tab.result.recommended["trial_id"] == "mss1"
    assert "estimated" not in tab.table.value


def test_profiling_tab_estimates_the_kernels_tensorrt_built(app: Workbench) -> None:
    pytest.importorskip("tensorrt_rtx", reason='needs TensorRT-RTX: pip install '
                                               '"tftrt-workbench[tensorrt]"')
    app.set_params({"minimum_segment_size": 4})
    app.check_tensorrt()  # the Summary tab's button: TensorRT-RTX builds the one engine
    app.target_gpu.set("T4")
    kernels = app.figures["estimate per kernel"]
    assert "Kernel times estimated for Tesla T4" in kernels.layout.title.text
    # Each kernel under its engine; the kernels that compute nothing summed into one row.
    assert all(label.startswith(("000_000: ", "shape calls / syncs ("))
               for label in kernels.data[0].y)
    assert "every engine from the kernels TensorRT built" in app.profile_tab.estimate.note.value
    app.target_gpu.set(None)


def test_a_calibration_belongs_to_the_model_it_measured(app: Workbench) -> None:
    app.set_params({"minimum_segment_size": 1})
    app.target_gpu.set("T4", batch_size=1)
    app.target_gpu.measured.value = 5.0
    assert "calibrated on" in app.profile_tab.estimate.note.value
    map_fn_cnn = app.model
    app.open(sample_models.build("quickstart_mlp"))
    try:
        assert app.target_gpu.calibration is None and app.target_gpu.measured.value == 0
        assert app.target_gpu.gpu == "T4"  # the GPU is a setting, kept across models
        assert "calibrated on" not in app.profile_tab.estimate.note.value
        assert "calibrated on" not in app.figures["estimate sweep"].layout.meta["estimate_label"]
    finally:
        app.open(map_fn_cnn)
        app.target_gpu.set(None)
