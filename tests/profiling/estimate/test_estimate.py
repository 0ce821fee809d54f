"""The GPU latency estimate: the datasheet table, per-kernel work, the fitted model against the
real trtexec profiles, and `workbench estimate`."""

from __future__ import annotations

import json

import pytest
from conftest import fixture_path, run_cli

from workbench.graph.gpu import preparation_target
from workbench.graph.gpu_facts import GPU_FACTS, UnknownGpuError, gpu_facts
from workbench.profiling.estimate.coefficients import load_coefficients
from workbench.profiling.estimate.kernels import kernel_work
from workbench.profiling.estimate.roofline import estimate_engine
from workbench.profiling.trtexec import read_trtexec_kernels


@pytest.mark.parametrize(("name", "expected"), [
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"), ("A100", "NVIDIA A100 80GB PCIe"),
    ("a100-sxm4-80gb", "NVIDIA A100-SXM4-80GB"), ("T4", "Tesla T4"), ("NVIDIA T4", "Tesla T4"),
    ("NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA GeForce RTX 3060 Laptop GPU"),
    ("RTX 3090", "NVIDIA GeForce RTX 3090"), ("TITAN RTX", "TITAN RTX"),
    ("H100", "NVIDIA H100 80GB HBM3"), ("H100 PCIe", "NVIDIA H100 PCIe"),
    ("Jetson AGX Orin", "Orin"), ("L4", "NVIDIA L4"), ("A10", "NVIDIA A10"),
])
def test_gpu_names_as_trtexec_prints_them_and_short_ones_resolve(name, expected):
    assert gpu_facts(name).name == expected


def test_an_unknown_gpu_lists_the_known_ones():
    with pytest.raises(UnknownGpuError) as error:
        gpu_facts("V100")
    assert "T4" in str(error.value) and "Jetson AGX Orin" in str(error.value)


def test_every_gpu_has_its_facts_and_source_and_prepares_graphs_for_its_capability():
    for gpu in GPU_FACTS:
        assert gpu.sms > 0 and gpu.memory_gb_s > 0 and gpu.source
        assert gpu.fp16_tflops > gpu.fp32_tflops and gpu.int8_tops >= gpu.fp16_tflops
        assert preparation_target(gpu.name).compute_capability == gpu.compute_capability
    assert gpu_facts("T4").peak_tflops("tf32") == gpu_facts("T4").fp32_tflops  # Turing: no TF32


def _layers(name: str) -> list:
    """The kernels of a fixture's layer-info file, through the one loader of such files."""
    folder = fixture_path(name)
    path = folder / "engine.graph.json"
    return list(read_trtexec_kernels(path if path.is_file() else folder / "layerinfo.json")
                .kernels)


def test_a_convolutions_work_comes_from_its_shapes_and_weights():
    first = next(kernel for kernel in _layers("keras-resnet50-rtx3090-fp16")
                 if kernel.type == "CaskConvolution")
    work = kernel_work(first)
    # ResNet-50's 7x7/2 stem: 118 M multiply-adds per image, batch 32.
    assert work.kind == "conv" and work.precision == "fp16"
    assert work.outputs == 32 * 112 * 112 * 64  # the GEMM's M x N, cut into tiles
    assert work.flops == pytest.approx(2 * 32 * 112 * 112 * 64 * 7 * 7 * 3)
    # Inputs, outputs, weights and bias in FP16.
    assert work.bytes == pytest.approx(2 * (32 * 3 * 224 * 224 + 32 * 64 * 112 * 112 + 9408
                                            + 64))


def test_a_first_layer_of_three_channels_runs_on_the_cuda_cores_but_in_fp16():
    """TensorRT's FP32 stem is a CUDA-core kernel (`scudnn`), its FP16 one pads the channels
    for the tensor cores (`first_layer_hmma`); a layer of 64 channels is a tensor-core one."""
    from workbench.profiling.estimate.roofline import compute_key

    rtx3090 = gpu_facts("RTX 3090")
    keys = {}
    for precision in ("fp16", "fp32"):
        convolutions = [kernel for kernel in _layers(f"keras-resnet50-rtx3090-{precision}")
                        if kernel.type == "CaskConvolution"]
        keys[precision] = [compute_key(kernel_work(k), rtx3090) for k in convolutions[:2]]
    assert keys == {"fp16": ["conv_fp16", "conv_fp16"], "fp32": ["simt", "conv_tf32"]}


def test_tiles_fit_the_gemms_columns_and_an_idle_gpu_splits_a_long_k():
    from workbench.profiling.estimate.roofline import tiles

    # N = 24 pays for 32 columns; RetinaNet's 819 classes for 7 x 128.
    assert tiles(1024 * 24, 24, 132, 64)[2] == 32
    waves, rows, columns, depth = tiles(4096 * 819, 819, 132, 2304)
    assert (columns, rows, waves) == (128, 128, 2) and depth == 2304  # 7 x 32 tiles
    # BERT's FFN output at batch 1 (M 128, N 768, K 3072): 24 tiles on 132 SMs. A matrix
    # product splits K five ways; a convolution leaves the SMs idle.
    assert tiles(128 * 768, 768, 132, 3072, split=True)[3] == pytest.approx(3072 / 5)
    assert tiles(128 * 768, 768, 132, 3072)[3] == 3072


@pytest.mark.parametrize("name", ["keras-resnet50-rtx3090-fp16", "keras-resnet50-rtx3090-fp32",
                                  "keras-resnet50-rtx3090-qat", "torch-resnet18-a100-fp16",
                                  "torch-resnet18-a100-fp32"])
def test_the_estimate_of_each_fixture_lands_near_trtexecs_gpu_compute_time(name):
    folder = fixture_path(name)
    metadata = json.loads((folder / "engine.profile.metadata.json").read_text())
    measured = metadata["performance_summary"]["GPU Compute Time"][3]
    gpu = metadata["device_information"]["Selected Device"]
    estimate = estimate_engine(_layers(name), gpu)
    # In sample (the fit saw these sets); the out-of-sample error is benchmarks/estimate.py's.
    assert estimate["total_ms"] == pytest.approx(measured, rel=0.4)
    assert estimate["gpu"] == gpu and "estimated for" in estimate["error_note"]


def test_resnet50_on_a_t4_is_estimated_faster_in_fp16_than_fp32_and_int8_faster_still():
    totals = {precision: estimate_engine(_layers(f"keras-resnet50-rtx3090-{precision}"),
                                         "T4")["total_ms"] for precision in ("fp32", "fp16", "qat")}
    assert totals["qat"] < totals["fp16"] < totals["fp32"] / 2


def test_a_faster_gpu_is_estimated_faster():
    layers = _layers("torch-resnet18-a100-fp16")
    order = ["Orin", "T4", "A10", "A100", "H100"]
    totals = [estimate_engine(layers, gpu)["total_ms"] for gpu in order]
    assert totals == sorted(totals, reverse=True)


def test_a_layer_info_file_without_shapes_is_a_one_line_error():
    from workbench.errors import WorkbenchError

    with pytest.raises(WorkbenchError, match="--profilingVerbosity=detailed"):
        estimate_engine(read_trtexec_kernels({"Layers": ["conv1 + relu1", "fc"]}), "T4")


def test_the_error_note_quotes_the_error_measured_out_of_sample_and_the_range():
    coefficients = load_coefficients()
    errors, span = coefficients["errors"]["out_of_sample"], coefficients["range"]
    document = estimate_engine(_layers("torch-resnet18-a100-fp32"), "T4")
    note = document["error_note"]
    assert note.startswith("estimated for Tesla T4; out of sample")
    assert f"median error {100 * errors['median_abs_error']:.0f}%" in note
    assert f"worst {100 * errors['max_abs_error']:.0f}%" in note
    assert f"range x{span['low']:.2f}-x{span['high']:.2f}" in note
    # The range is the out-of-sample 10th-90th percentile: below and above the estimate.
    assert span["low"] < 1 < span["high"]
    assert document["total_low_ms"] == pytest.approx(document["total_ms"] * span["low"])
    assert document["total_high_ms"] == pytest.approx(document["total_ms"] * span["high"])


def test_every_efficiency_is_at_most_the_datasheet_peak():
    coefficients = load_coefficients()
    shares = [v for table in coefficients["compute_eff"].values() for v in table.values()]
    shares += [*coefficients["memory_eff"].values()]
    assert shares and all(0 < share <= 1 for share in shares)
    assert coefficients["l2_speedup"] >= 1  # L2 is no slower than DRAM


def test_a_gemm_one_tile_past_a_full_wave_takes_a_second_wave():
    from workbench.profiling.estimate.kernels import KernelWork
    from workbench.profiling.estimate.roofline import kernel_time_ms

    coefficients, h200 = load_coefficients(), gpu_facts("H200")
    tile = 128 * 128  # 132 such tiles fill the H200's 132 SMs once
    flops_per_output = 2 * 4096  # K = 4096: compute-bound

    def ms(tiles: int) -> float:  # N = 128: one column of 128 x 128 tiles
        outputs = tiles * tile
        return kernel_time_ms(KernelWork("gemm", outputs * flops_per_output, 1e3, "fp16",
                                         outputs, columns=128), h200, coefficients)

    one_wave, launch = ms(132), coefficients["launch_ms"]["gemm"]
    assert ms(133) - launch == pytest.approx(2 * (one_wave - launch))
    assert ms(264) == pytest.approx(ms(133))  # the second wave is free to fill


# --- convert --target-gpu: the estimate from the TF nodes of a converted model -------------

@pytest.fixture(scope="module")
def resnet50_session():
    import sample_models
    from workbench.conversion.session import ConversionSession

    return ConversionSession.open(sample_models.build("resnet50"))


def test_resnet50_on_a_t4_fp16_beats_fp32_and_both_beat_native_tf(resnet50_session):
    from workbench.conversion.params import ConversionParams
    from workbench.profiling.estimate.graph_estimate import graph_estimate

    estimates = {}
    for precision in ("FP32", "FP16"):
        result = resnet50_session.convert(ConversionParams(precision_mode=precision))
        graph = resnet50_session.prepared(precision).graph
        estimates[precision] = graph_estimate(graph, result.engines, "T4", precision, 8)
    fp32, fp16 = estimates["FP32"], estimates["FP16"]
    assert fp16["converted_ms"] < fp32["converted_ms"] < fp32["native_ms"]
    assert fp32["native_ms"] == pytest.approx(fp16["native_ms"])  # native TF runs FP32
    assert fp16["converted_ms"] == pytest.approx(fp16["engines_ms"] + fp16["native_ops_ms"])
    assert fp16["label"].startswith("estimated for Tesla T4") and "TF nodes" in fp16["label"]
    # The TF nodes' estimate of the whole-model engine agrees with the one from TensorRT's own
    # kernels of the same network (the fixture's ResNet-50, batch 32) within a factor of 1.5.
    from_nodes = graph_estimate(resnet50_session.prepared("FP16").graph,
                                resnet50_session.convert(ConversionParams(
                                    precision_mode="FP16")).engines, "T4", "FP16", 32)
    from_kernels = estimate_engine(_layers("keras-resnet50-rtx3090-fp16"), "T4")["total_ms"]
    assert from_nodes["engines_ms"] == pytest.approx(from_kernels, rel=0.5)


@pytest.fixture(scope="module")
def digits_documents(tmp_path_factory):
    """`convert digits_cnn --json --target-gpu A100 --target-batch-size 4`, from TF nodes
    only and with TensorRT's kernels (`--tensorrt`)."""
    import sample_models

    model = str(sample_models.build("digits_cnn"))
    cache = str(tmp_path_factory.mktemp("cache"))
    documents = {}
    for flags in ((), ("--tensorrt",)):
        done = run_cli("convert", model, "--json", *flags, "--target-gpu", "A100",
                       "--target-batch-size", "4", env={"WORKBENCH_CACHE_DIR": cache})
        assert done.returncode == 0, done.stderr
        documents["kernels" if flags else "nodes"] = json.loads(done.stdout)
    return documents


def test_cli_convert_target_gpu_adds_the_estimate(digits_documents):
    document = digits_documents["nodes"]
    estimate = document["estimate"]
    assert {"gpu", "batch_size", "converted_ms", "native_ms", "engines_ms",
            "native_ops_ms"} <= set(estimate)
    assert estimate["gpu"] == "NVIDIA A100 80GB PCIe" and estimate["batch_size"] == 4
    assert document["engines"] and all(e["estimated_ms"] > 0 for e in document["engines"])
    assert all(e["estimated_from"] == "tf_nodes" for e in document["engines"])
    assert estimate["engines_ms"] == pytest.approx(sum(e["estimated_ms"]
                                                       for e in document["engines"]))
    unknown = run_cli("convert", "no/model", "--target-gpu", "GTX 480")
    assert unknown.returncode == 2 and "Unknown GPU 'GTX 480'" in unknown.stderr


def test_cli_convert_measured_ms_calibrates_every_figure_on_that_gpu(digits_documents):
    import sample_models

    done = run_cli("convert", str(sample_models.build("digits_cnn")), "--json", "--target-gpu",
                   "A100", "--target-batch-size", "4", "--measured-ms", "0.5")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    estimate, raw = document["estimate"], digits_documents["nodes"]["estimate"]
    assert estimate["converted_ms"] == pytest.approx(0.5)
    assert estimate["native_ms"] == pytest.approx(raw["native_ms"] * 0.5 / raw["converted_ms"])
    assert "calibrated on this conversion at batch 4" in estimate["label"]
    assert estimate["converted_low_ms"] < 0.5 < estimate["converted_high_ms"]
    engines = document["engines"]
    assert sum(e["estimated_ms"] for e in engines) == pytest.approx(estimate["engines_ms"])
    assert all(e["estimated_low_ms"] < e["estimated_ms"] < e["estimated_high_ms"]
               for e in engines)


# --- convert --tensorrt --target-gpu: engines estimated from the kernels TensorRT built ------

def _tensor(shape, dtype="FP16"):
    from workbench.engines.inspection.tensorrt_kernels import KernelTensor

    return KernelTensor("t", tuple(shape), dtype, dtype)


def test_a_fused_kernel_gets_the_flops_of_the_convolution_it_holds_once():
    from workbench.engines.inspection.tensorrt_kernels import Kernel
    from workbench.profiling.estimate.kernels import KernelWork, engine_work, with_batch

    conv = KernelWork("gemm", 1e9, 1e6, "fp16", 20.0)
    relu = KernelWork("memory", 0.0, 1e6, "fp16", 0.0)
    softmax = KernelWork("norm", 0.0, 1e4, "fp16", 0.0)
    kernels = [  # as TensorRT-RTX lists them: a generated kernel preparing the convolution's
        # input names it too; the convolution runs in the `correlation` kernel
        Kernel("__myl_CastResh_myl0_1", "kgen", (), ("conv",), (_tensor([-1, 3, 8, 8], "FP32"),),
               (_tensor([-1, 4, 8, 8]),)),
        Kernel("conv", "correlation", (), ("conv", "relu"), (_tensor([-1, 4, 8, 8]),),
               (_tensor([-1, 16, 8, 8]),), (_tensor([16, 4, 3, 3]),)),
        Kernel("__myl_Soft_myl0_3", "kgen", (), ("softmax",), (_tensor([-1, 16]),),
               (_tensor([-1, 16]),)),
        Kernel("__mye1_0", "shape_call", ()),
    ]
    works = engine_work([with_batch(k, 8) for k in kernels],
                        {"conv": conv, "relu": relu, "softmax": softmax})
    assert [w.kind for w in works] == ["memory", "gemm", "norm", "free"]
    assert works[1].flops == 1e9 and works[0].flops == 0
    # Bytes are the kernel's own tensors at batch 8 and TensorRT's datatypes, weights too.
    assert works[0].bytes == 8 * 3 * 64 * 4 + 8 * 4 * 64 * 2
    assert works[1].bytes == 2 * (8 * 4 * 64 + 8 * 16 * 64 + 16 * 4 * 9)


def test_cli_convert_tensorrt_target_gpu_estimates_engines_from_their_kernels(
        digits_documents):
    kernels, nodes = digits_documents["kernels"], digits_documents["nodes"]
    engines = [engine["tensorrt"] for engine in kernels["engines"]]
    assert engines and all(e["estimated_from"] == "tensorrt_kernels" and e["estimated_ms"] > 0
                           for e in engines)
    assert "every engine from the kernels TensorRT built" in kernels["estimate"]["label"]
    assert kernels["estimate"]["engines_ms"] == pytest.approx(
        sum(e["estimated_ms"] for e in engines))
    # Same engines, same native TF; the two bases agree to a factor of 1.5 on this small CNN.
    assert kernels["estimate"]["native_ms"] == pytest.approx(nodes["estimate"]["native_ms"])
    assert kernels["estimate"]["engines_ms"] == pytest.approx(nodes["estimate"]["engines_ms"],
                                                              rel=0.5)


def test_tune_on_a_t4_ranks_resnet50_fp16_above_fp32_although_the_cpu_timed_it_slower(
        resnet50_session):
    from test_estimate_surfaces import measured_trial

    from workbench.tuning import TuneResult
    from workbench.tuning.estimates import estimate_trials

    # As the issue found on this CPU: emulated FP16 timed slower than FP32.
    trials = [measured_trial("FP32", 3, 60.0, 1), measured_trial("FP16", 3, 110.0, 1, 1e-3)]
    assert TuneResult(trials).recommended["trial_id"] == "FP32-3"
    estimated = TuneResult(trials, estimates=estimate_trials(resnet50_session, trials, "T4"))
    assert estimated.recommended["trial_id"] == "FP16-3"
    assert estimated.table.set_index("trial_id")["latency_ms"].to_dict() == {
        "FP32-3": 60.0, "FP16-3": 110.0}


def test_convolutions_and_gemms_have_their_own_shares_and_borrow_across_generations():
    from workbench.profiling.estimate.roofline import compute_efficiency

    coefficients = load_coefficients()
    hopper = coefficients["compute_eff"]["hopper"]
    assert compute_efficiency(coefficients, "hopper", "conv_tf32") == hopper["conv_tf32"]
    assert compute_efficiency(coefficients, "hopper", "tf32") == hopper["tf32"]
    # A class Ada never measured takes Ampere's share of its own peak, not a GEMM's.
    assert compute_efficiency(coefficients, "ada", "conv_fp16") == \
        coefficients["compute_eff"]["ampere"]["conv_fp16"]
    # cuDNN's NCHW path (measured corpora only) likewise; where no generation measured it at
    # that precision, a convolution's share.
    assert compute_efficiency(coefficients, "ampere", "conv_nchw_tf32") == hopper["conv_nchw_tf32"]
    assert compute_efficiency(coefficients, "ampere", "conv_nchw_int8") == \
        coefficients["compute_eff"]["ampere"]["conv_int8"]
